//go:build wasip1

// Command loop is a ledger whose decide never returns on the command
// "loop", sleeps an hour on "sleep" (in WASI's poll_oneoff, a host
// function), spins a few milliseconds of CPU on "busy", logs a line through
// the host function factline.log on "log", and answers every other
// command.
package main

import (
	"time"
	"unsafe"

	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

func main() {}

var spins uint64

// busySpins is a few milliseconds of work for "busy" (each iteration of a
// wasm loop checks for a stop, a few tens of nanoseconds).
const busySpins = 300_000

//go:wasmimport factline log
func hostLog(level, ptr, n uint32)

var logLine = []byte("loop: a line from the guest")

//go:wasmexport factline_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return kit.Alloc(size) }

//go:wasmexport factline_free
func free(ptr, size uint32) {}

//go:wasmexport factline_describe
func describe() uint64 { return kit.Ledger("loop") }

//go:wasmexport factline_decide
func decide(ptr, n uint32) uint64 {
	switch kit.Command(kit.Input(ptr, n)) {
	case "loop":
		for {
			spins++
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "busy":
		for range busySpins {
			spins++
		}
	case "log":
		hostLog(1, uint32(uintptr(unsafe.Pointer(&logLine[0]))), uint32(len(logLine)))
	}
	return kit.OK("loop")
}

//go:wasmexport factline_evolve
func evolve(ptr, n uint32) uint64 { return kit.State() }

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 { return kit.Unsupported() }
