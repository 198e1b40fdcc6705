//go:build wasip1

// Command hog is a ledger whose decide allocates without bound on the
// command "hog" (keeping every block reachable) and answers every other
// command.
package main

import (
	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

func main() {}

var hoard [][]byte

//go:wasmexport factline_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return kit.Alloc(size) }

//go:wasmexport factline_free
func free(ptr, size uint32) {}

//go:wasmexport factline_describe
func describe() uint64 { return kit.Ledger("hog") }

//go:wasmexport factline_decide
func decide(ptr, n uint32) uint64 {
	if kit.Command(kit.Input(ptr, n)) == "hog" {
		for {
			b := make([]byte, 1<<20)
			b[len(b)-1] = 1
			hoard = append(hoard, b)
		}
	}
	return kit.OK("hog")
}

//go:wasmexport factline_evolve
func evolve(ptr, n uint32) uint64 { return kit.State() }

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 { return kit.Unsupported() }
