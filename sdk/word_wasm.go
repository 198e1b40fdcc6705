//go:build wasm

package sdk

import "unsafe"

// load64 returns the 8 bytes of b at i as a little-endian word, in one
// unaligned load (wasm allows them). The caller checks i+8 <= len(b).
func load64(b []byte, i int) uint64 {
	_ = b[i+7]
	return *(*uint64)(unsafe.Pointer(&b[i]))
}

// put64 stores v little-endian at the start of b (len(b) >= 8).
func put64(b []byte, v uint64) {
	_ = b[7]
	*(*uint64)(unsafe.Pointer(&b[0])) = v
}
