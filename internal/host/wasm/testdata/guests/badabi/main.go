//go:build wasip1

// Command badabi is a complete ledger that claims ABI version 2.
package main

import (
	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
)

func main() {}

//go:wasmexport factline_abi_version
func abiVersion() int32 { return 2 }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return kit.Alloc(size) }

//go:wasmexport factline_free
func free(ptr, size uint32) {}

//go:wasmexport factline_describe
func describe() uint64 { return kit.Ledger("badabi") }

//go:wasmexport factline_decide
func decide(ptr, n uint32) uint64 { return kit.OK("badabi") }

//go:wasmexport factline_evolve
func evolve(ptr, n uint32) uint64 { return kit.State() }

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 { return kit.Unsupported() }
