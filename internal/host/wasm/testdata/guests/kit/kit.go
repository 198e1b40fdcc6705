//go:build wasip1

// Package kit implements the byte-passing half of the Factline plugin ABI
// by hand for the host tests' guests (the real guest SDK lives in sdk/ and
// is deliberately not used here). It keeps one growing input buffer and one
// output buffer per instance, as the ABI recommends, so a steady-state call
// allocates nothing for passing bytes.
package kit

import (
	"unsafe"

	"github.com/factline/factline/sdk/abi"
)

var (
	in  []byte // returned by Alloc again and again
	out []byte // the last output; valid until the next call
)

// Alloc implements factline_alloc: it returns the input buffer, grown to
// at least size bytes.
func Alloc(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	if uint32(cap(in)) < size {
		in = make([]byte, size+size/4)
	}
	in = in[:size]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

// Input is the input of a call, in the buffer Alloc returned. It is valid
// until the next Alloc.
func Input(ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	// ptr is an address in this instance's linear memory, from Alloc.
	return unsafe.Slice((*byte)(unsafe.Add(nil, ptr)), n)
}

// Out returns the output buffer emptied, with status as its first byte, for
// the caller to append the JSON document to; Done packs it.
func Out(status abi.Status) []byte { return append(out[:0], byte(status)) }

// Done keeps b as the output and packs its pointer and length.
func Done(b []byte) uint64 {
	out = b
	return abi.Pack(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)))
}

// Reply frames status and body.
func Reply(status abi.Status, body []byte) uint64 {
	return Done(append(Out(status), body...))
}

// Error replies with a status 1-5 and an error document.
func Error(status abi.Status, code, message string) uint64 {
	b := Out(status)
	b = append(b, `{"code":`...)
	b = AppendString(b, code)
	b = append(b, `,"message":`...)
	b = AppendString(b, message)
	b = append(b, '}')
	return Done(b)
}

// AppendString appends s as a JSON string.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
