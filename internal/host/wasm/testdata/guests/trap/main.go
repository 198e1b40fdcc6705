//go:build wasip1

// Command trap is a ledger whose decide breaks on demand: the command
// "panic" panics without recovering (the Go runtime exits the instance),
// and "oob", "empty", "badstatus", "badjson" and "huge" return outputs
// that break the ABI's framing. Every other command is answered.
package main

import (
	"unsafe"

	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

func main() {}

var huge []byte

//go:wasmexport factline_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return kit.Alloc(size) }

//go:wasmexport factline_free
func free(ptr, size uint32) {}

//go:wasmexport factline_describe
func describe() uint64 { return kit.Ledger("trap") }

//go:wasmexport factline_decide
func decide(ptr, n uint32) uint64 {
	switch kit.Command(kit.Input(ptr, n)) {
	case "panic":
		panic("deliberate unrecovered panic")
	case "oob":
		return abi.Pack(0xfffff000, 64)
	case "empty":
		return abi.Pack(kit.Alloc(1), 0)
	case "badstatus":
		return kit.Reply(9, []byte(`{}`))
	case "badjson":
		return kit.Reply(abi.StatusOK, []byte(`{"facts":[`))
	case "huge":
		huge = make([]byte, 5<<20)
		huge[0] = byte(abi.StatusOK)
		return abi.Pack(uint32(uintptr(unsafe.Pointer(&huge[0]))), uint32(len(huge)))
	}
	return kit.OK("trap")
}

//go:wasmexport factline_evolve
func evolve(ptr, n uint32) uint64 { return kit.State() }

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 { return kit.Unsupported() }
