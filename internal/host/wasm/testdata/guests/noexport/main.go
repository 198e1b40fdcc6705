//go:build wasip1

// Command noexport is a ledger without factline_decide and factline_evolve.
package main

import (
	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

func main() {}

//go:wasmexport factline_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return kit.Alloc(size) }

//go:wasmexport factline_free
func free(ptr, size uint32) {}

//go:wasmexport factline_describe
func describe() uint64 { return kit.Ledger("noexport") }

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 { return kit.Unsupported() }
