//go:build wasip1

// Command baddescribe is a complete plugin whose describe document breaks
// most of the rules: a bad name, version and kind, no entity types, and
// malformed commands.
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
func describe() uint64 {
	return kit.Reply(abi.StatusOK, []byte(`{"abi":1,"name":"Bad Name!","version":"latest","kind":"widget","commands":[`+
		`{"name":"","method":"POST","path":"/x"},`+
		`{"name":"go","method":"FETCH","path":"no-slash"},`+
		`{"name":"go","method":"POST","path":"/go"},`+
		`{"name":"peek","method":"GET","path":"/peek","read_only":true,"emits":["peeked"]}]}`))
}

//go:wasmexport factline_decide
func decide(ptr, n uint32) uint64 { return kit.OK("baddescribe") }

//go:wasmexport factline_evolve
func evolve(ptr, n uint32) uint64 { return kit.State() }

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 { return kit.Unsupported() }
