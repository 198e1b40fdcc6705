package sdk

import (
	"math/bits"
	"strconv"
	"unsafe"
)

// Word-at-a-time helpers. Inside a WebAssembly guest run with wazero's
// close-on-context-done, every loop iteration and every call costs a trip
// to the host (about 50 ns), and the runtime's byte comparisons loop once
// per byte; these look at 8 bytes per iteration instead.

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// stringStop flags the bytes of v that end a run of plain string bytes:
// '"', '\\' and control characters. The lowest flagged byte is exact.
func stringStop(v uint64) uint64 {
	q := v ^ (lsb * '"')
	s := v ^ (lsb * '\\')
	return (((q - lsb) &^ q) | ((s - lsb) &^ s) | ((v - lsb*0x20) &^ v)) & msb
}

// nonDigit flags the bytes of v that are not ASCII digits; the lowest
// flagged byte is exact.
func nonDigit(v uint64) uint64 {
	return ((v + lsb*0x46) | (v - lsb*0x30)) & msb
}

// firstFlag returns the index of the lowest flagged byte of a non-zero
// mask.
func firstFlag(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// short returns the first min(len(b), 8) bytes of b as a little-endian
// word, zero-padded. When b has capacity for 8 bytes (b is usually part of
// a larger input) it loads and masks instead of copying.
func short(b []byte) uint64 {
	if cap(b) >= 8 {
		return load64(b[:8], 0) & (^uint64(0) >> ((8 - min(len(b), 8)) * 8))
	}
	return shortCopy(b)
}

func shortCopy(b []byte) uint64 {
	var w [8]byte
	copy(w[:], b)
	return load64(w[:], 0)
}

// stringBytes returns the bytes of s without copying; they must not be
// written.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// equal reports whether a and s hold the same bytes, comparing words.
func equal(a []byte, s string) bool {
	n := len(a)
	if n != len(s) {
		return false
	}
	b := stringBytes(s)
	if n < 8 {
		return short(a) == short(b)
	}
	for i := 0; i+8 < n; i += 8 {
		if load64(a, i) != load64(b, i) {
			return false
		}
	}
	return load64(a, n-8) == load64(b, n-8)
}

// parse8 returns the value of 8 ASCII digits loaded as a little-endian
// word (the first digit in the lowest byte).
func parse8(v uint64) uint64 {
	v -= lsb * '0'
	v = (v*10 + v>>8) & 0x00FF00FF00FF00FF
	v = (v*100 + v>>16) & 0x0000FFFF0000FFFF
	return (v*10000 + v>>32) & 0xFFFFFFFF
}

// digitsAt returns the value of the n ASCII digits (n <= 19) of b at i,
// eight at a time.
func digitsAt(b []byte, i, n int) uint64 {
	var v uint64
	if r := n & 7; r != 0 {
		var w uint64
		if i+8 <= len(b) {
			w = load64(b, i)
		} else {
			w = short(b[i : i+r])
		}
		// Move the r digits to the top and fill the bottom with '0's.
		v = parse8(w<<(8*(8-r)) | (lsb*'0')>>(8*r))
		i += r
		n -= r
	}
	for ; n > 0; n -= 8 {
		v = v*100000000 + parse8(load64(b, i))
		i += 8
	}
	return v
}

// keySet finds a key among a few names (keys of the ABI messages, at
// most 16 bytes) with word comparisons: the key's length picks the
// candidates, usually one.
type keySet struct {
	byLen [17][]keyName
}

type keyName struct {
	first, last uint64 // the first and the last 8 bytes, zero-padded
	id          int
}

func newKeySet(names ...string) *keySet {
	s := new(keySet)
	for id, n := range names {
		b := []byte(n)
		if len(b) == 0 || len(b) > 16 {
			panic("sdk: key name of 1 to 16 bytes: " + n)
		}
		k := keyName{first: shortCopy(b), id: id}
		if len(b) > 8 {
			k.last = load64(b, len(b)-8)
		}
		s.byLen[len(b)] = append(s.byLen[len(b)], k)
	}
	return s
}

// find returns the index of key in the names, or -1.
func (s *keySet) find(key []byte) int {
	if len(key) == 0 || len(key) > 16 {
		return -1
	}
	k0 := short(key)
	var k1 uint64
	if len(key) > 8 {
		k1 = load64(key, len(key)-8)
	}
	for _, n := range s.byLen[len(key)] {
		if n.first == k0 && n.last == k1 {
			return n.id
		}
	}
	return -1
}

// internTable keeps recently decoded strings so a guest does not allocate
// the same fact type, currency or tenant id again on every call.
type internTable struct {
	e [256]interned
}

type interned struct {
	s     string
	first uint64 // short of s
}

func (t *internTable) get(b []byte) string {
	n := len(b)
	if n == 0 || n > 64 {
		return string(b)
	}
	w := short(b)
	h := w*0x9E3779B97F4A7C15 ^ uint64(n)
	if n > 8 {
		h ^= load64(b, n-8) * 0xC2B2AE3D27D4EB4F
	}
	e := &t.e[h>>56]
	if len(e.s) == n && e.first == w && (n <= 8 || equal(b, e.s)) {
		return e.s
	}
	e.s, e.first = string(b), w
	return e.s
}

// itoa8 returns the 8 decimal digits of v < 10^8 (with leading zeros) as
// ASCII in a little-endian word, the first digit in the lowest byte: no
// loop, no division by a variable.
func itoa8(v uint64) uint64 {
	x := v/10000 | v%10000<<32                 // two 4-digit lanes, the high digits first
	q := (x * 5243 >> 19) & 0x0000007F0000007F // each lane / 100
	x = q | (x-q*100)<<16                      // four 2-digit lanes
	q = (x * 103 >> 10) & 0x000F000F000F000F   // each lane / 10
	return (q | (x-q*10)<<8) + lsb*'0'
}

// digitCount returns the number of decimal digits of v (1 for 0).
func digitCount(v uint64) int {
	t := bits.Len64(v) * 1233 >> 12 // about log10(v)
	if t < len(pow10) && v >= pow10[t] {
		t++
	}
	return max(t, 1)
}

// appendUint appends v in decimal.
func appendUint(b []byte, v uint64) []byte {
	var w [16]byte
	if v < 1e8 {
		put64(w[8:], itoa8(v))
		return append(b, w[16-digitCount(v):]...)
	}
	if v < 1e16 {
		put64(w[:8], itoa8(v/1e8))
		put64(w[8:], itoa8(v%1e8))
		return append(b, w[16-digitCount(v):]...)
	}
	return strconv.AppendUint(b, v, 10)
}
