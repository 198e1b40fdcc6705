//go:build wasip1

// Command badabi is a broken fixture: factline_abi_version returns 2, a
// version the host does not support.
package main

import (
	"github.com/factline/factline/sdk/conformance/testdata/rawabi"
)

func main() {}

//go:wasmexport factline_abi_version
func abiVersion() int32 { return 2 }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return rawabi.Alloc(size) }

//go:wasmexport factline_free
func free(uint32, uint32) {}

//go:wasmexport factline_describe
func describe() uint64 { return rawabi.Describe() }

//go:wasmexport factline_decide
func decide(_, n uint32) uint64 { return rawabi.Decide(n) }

//go:wasmexport factline_evolve
func evolve(_, n uint32) uint64 { return rawabi.Evolve(n) }

//go:wasmexport factline_handle
func handle(_, n uint32) uint64 { return rawabi.Handle(n) }
