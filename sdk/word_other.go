//go:build !wasm

package sdk

import "encoding/binary"

// load64 returns the 8 bytes of b at i as a little-endian word.
func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// put64 stores v little-endian at the start of b.
func put64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
