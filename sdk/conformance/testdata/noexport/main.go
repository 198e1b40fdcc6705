//go:build wasip1

// Command noexport is a broken fixture: it does not export
// factline_evolve.
package main

import (
	"github.com/factline/factline/sdk/conformance/testdata/rawabi"
)

func main() {}

//go:wasmexport factline_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return rawabi.Alloc(size) }

//go:wasmexport factline_free
func free(uint32, uint32) {}

//go:wasmexport factline_describe
func describe() uint64 { return rawabi.Describe() }

//go:wasmexport factline_decide
func decide(_, n uint32) uint64 { return rawabi.Decide(n) }

//go:wasmexport factline_handle
func handle(_, n uint32) uint64 { return rawabi.Handle(n) }
