//go:build wasip1

// Package rawabi implements a tiny ledger over the plugin ABI by hand,
// without the SDK, for the conformance kit's broken fixtures: each fixture
// exports these functions, leaving one out or bending one. The ledger
// serves entity type "thing" with one command, ping, which records a
// "pinged" fact; its state is always {}.
package rawabi

import (
	"bytes"
	"unsafe"

	"github.com/factline/factline/sdk/abi"
)

var in, out []byte

// Alloc implements factline_alloc.
func Alloc(size uint32) uint32 {
	if uint32(cap(in)) < size || cap(in) == 0 {
		in = make([]byte, size+64)
	}
	in = in[:size]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

// Input is the input of a call (the buffer Alloc returned).
func Input(n uint32) []byte { return in[:n] }

// Reply frames a status and a JSON document.
func Reply(status abi.Status, doc string) uint64 {
	out = append(append(out[:0], byte(status)), doc...)
	return abi.Pack(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)))
}

// Describe implements factline_describe.
func Describe() uint64 {
	return Reply(abi.StatusOK, `{"abi":1,"name":"raw","version":"1.0.0","kind":"ledger","entity_types":["thing"],`+
		`"commands":[{"name":"ping","method":"POST","path":"/ping","emits":["pinged"]}],"emits":["pinged"]}`)
}

// Command finds the command of a decide input, checking its syntax only
// loosely; ok is false when the input is not what it expects.
func Command(input []byte) (cmd string, ok bool) {
	i := bytes.Index(input, []byte(`"command":"`))
	if i < 0 || input[0] != '{' {
		return "", false
	}
	rest := input[i+11:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return string(rest[:j]), true
}

// Decide implements factline_decide with error replies for anything odd.
func Decide(n uint32) uint64 {
	cmd, ok := Command(Input(n))
	switch {
	case !ok:
		return Reply(abi.StatusBadInput, `{"code":"invalid_input","message":"not a decide input"}`)
	case cmd == "ping":
		return Reply(abi.StatusOK, `{"facts":[{"type":"pinged","data":{}}]}`)
	}
	return Reply(abi.StatusUnknownCommand, `{"code":"unknown_command","message":"no such command"}`)
}

// Evolve implements factline_evolve: the state is always {}.
func Evolve(n uint32) uint64 {
	if input := Input(n); len(input) == 0 || input[0] != '{' || !bytes.Contains(input, []byte(`"fact"`)) {
		return Reply(abi.StatusBadInput, `{"code":"invalid_input","message":"not an evolve input"}`)
	}
	return Reply(abi.StatusOK, `{}`)
}

// Handle implements factline_handle: a ledger has no handlers.
func Handle(uint32) uint64 {
	return Reply(abi.StatusUnsupported, `{"code":"unsupported","message":"a ledger"}`)
}
