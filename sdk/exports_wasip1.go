//go:build wasip1

package sdk

import (
	"os"
	"runtime/debug"
	"unsafe"

	"github.com/factline/factline/sdk/abi"
)

// The ABI exports (sdk/ABI.md). An instance runs one call at a time, so
// the buffers below are reused from call to call without locking.

// memoryLimit is the Go heap's soft limit when the host does not set
// GOMEMLIMIT: below the default 64 MiB instance cap, so the collector
// works harder before the cap is reached.
const memoryLimit = 48 << 20

// Inputs and outputs larger than this are not kept between calls.
const keepBuffer = 1 << 20

var (
	input    []byte          // the one input buffer factline_alloc hands out
	guest    = newCall(true) // every call's decoders, output and scratch values
	output   = &guest.out    // every output is written here
	describe []byte          // describe output, computed once
)

func init() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}

//go:wasmexport factline_abi_version
func wasmABIVersion() int32 { return abi.Version }

//go:wasmexport factline_alloc
func wasmAlloc(size int32) uint32 {
	if size < 0 {
		return 0
	}
	if n := int(size); cap(input) < n || cap(input) == 0 {
		input = make([]byte, max(n, 2*cap(input), 256))
	}
	input = input[:cap(input)]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

//go:wasmexport factline_free
func wasmFree(ptr, size uint32) {
	if ptr == addr(input) && cap(input) > keepBuffer {
		input = nil
	}
}

//go:wasmexport factline_describe
func wasmDescribe() uint64 {
	if describe == nil {
		serve(registered, exportDescribe, nil, guest)
		if len(output.buf) == 0 || output.buf[0] != byte(StatusOK) {
			return result()
		}
		describe = append([]byte(nil), output.buf...)
	}
	return abi.Pack(addr(describe), uint32(len(describe)))
}

//go:wasmexport factline_decide
func wasmDecide(ptr, n uint32) uint64 { return serveInput(exportDecide, ptr, n) }

//go:wasmexport factline_evolve
func wasmEvolve(ptr, n uint32) uint64 { return serveInput(exportEvolve, ptr, n) }

//go:wasmexport factline_handle
func wasmHandle(ptr, n uint32) uint64 { return serveInput(exportHandle, ptr, n) }

// serveInput serves one call whose input the host wrote into the buffer
// factline_alloc returned.
func serveInput(fn export, ptr, n uint32) uint64 {
	if cap(output.buf) > keepBuffer {
		output.buf = nil
	}
	if ptr != addr(input) || int(n) > cap(input) {
		output.Reset()
		writeError(output, &Error{Status: StatusBadInput, Code: "invalid_input", Message: "the input is not in the block factline_alloc returned"})
		return result()
	}
	serve(registered, fn, input[:n], guest)
	if cap(input) > keepBuffer {
		input = nil
	}
	return result()
}

func result() uint64 { return abi.Pack(addr(output.buf), uint32(len(output.buf))) }

func addr(b []byte) uint32 {
	if cap(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
