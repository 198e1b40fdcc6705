//go:build wasip1

// Command trap is a broken fixture: its decide reads the command at a
// fixed place without checking the input, so malformed input panics, and
// with no SDK to recover the panic the call traps.
package main

import (
	"bytes"

	"github.com/factline/factline/sdk/abi"
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
func decide(_, n uint32) uint64 {
	in := rawabi.Input(n)
	start := bytes.Index(in, []byte(`"command":"`)) + 11 // 10 when missing: no check
	end := start + bytes.IndexByte(in[start:], '"')      // panics on short or odd input
	if string(in[start:end]) == "ping" {
		return rawabi.Reply(abi.StatusOK, `{"facts":[{"type":"pinged","data":{}}]}`)
	}
	return rawabi.Reply(abi.StatusUnknownCommand, `{"code":"unknown_command","message":"no such command"}`)
}

//go:wasmexport factline_evolve
func evolve(_, n uint32) uint64 { return rawabi.Evolve(n) }

//go:wasmexport factline_handle
func handle(_, n uint32) uint64 { return rawabi.Handle(n) }
