package pluginrt

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/factline/factline/sdk/abi"
)

// Call is a guest export the host calls with an input.
type Call uint8

// The calls.
const (
	CallDecide Call = iota
	CallEvolve
	CallHandle
	NumCalls
)

// Short names inside the package.
type call = Call

const (
	callDecide = CallDecide
	callEvolve = CallEvolve
	callHandle = CallHandle
	numCalls   = NumCalls
)

var (
	callNames   = [numCalls]string{"decide", "evolve", "handle"}
	callExports = [numCalls]string{abi.ExportDecide, abi.ExportEvolve, abi.ExportHandle}
)

// String is decide, evolve or handle.
func (c Call) String() string { return callNames[c] }

// instance is one instantiated guest. It is not safe for concurrent use:
// the pool hands it to one call at a time. Export handles are looked up
// once here, not per call.
type instance struct {
	mod   api.Module
	mem   api.Memory
	alloc api.Function
	fns   [numCalls]api.Function
	stack [2]uint64
	out   *capWriter // the guest's stdout and stderr, reset per call
	// sleeper ends the guest's sleeps when the call's context ends.
	sleeper *Sleeper
}

// abiError is a broken ABI rule found in a guest's answer; it is handled
// as a trap.
type abiError struct{ msg string }

func (e *abiError) Error() string { return "ABI violation: " + e.msg }

func abiErrorf(format string, args ...any) error { return &abiError{fmt.Sprintf(format, args...)} }

// exec passes input to export fn and reads the framed output. For status 0
// it calls decode with the JSON document (a view into guest memory, valid
// only during decode); for statuses 1-5 it returns the reply as a
// *CallError. Any other error means the instance must be discarded.
func (in *instance) exec(ctx context.Context, fn api.Function, input []byte, decode func([]byte) error) (*CallError, error) {
	in.sleeper.Watch(ctx)
	st := in.stack[:]
	st[0] = uint64(len(input))
	if err := in.alloc.CallWithStack(ctx, st); err != nil {
		return nil, err
	}
	ptr := uint32(st[0])
	if ptr == 0 {
		return nil, abiErrorf("%s(%d) returned 0", abi.ExportAlloc, len(input))
	}
	if !in.mem.Write(ptr, input) {
		return nil, abiErrorf("%s(%d) returned %d, outside the %d bytes of memory", abi.ExportAlloc, len(input), ptr, in.mem.Size())
	}
	st[0], st[1] = uint64(ptr), uint64(len(input))
	if err := fn.CallWithStack(ctx, st); err != nil {
		return nil, err
	}
	return in.output(st[0], decode)
}

// output reads a packed (ptr, len) result.
func (in *instance) output(packed uint64, decode func([]byte) error) (*CallError, error) {
	ptr, n := abi.Unpack(packed)
	if n == 0 {
		return nil, abiErrorf("empty output (no status byte)")
	}
	if n > MaxOutputBytes {
		return nil, abiErrorf("output of %d bytes exceeds the %d-byte limit", n, MaxOutputBytes)
	}
	out, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, abiErrorf("output [%d, +%d) is outside the %d bytes of memory", ptr, n, in.mem.Size())
	}
	return parseOutput(out, decode)
}

// parseOutput reads a status byte and the JSON after it.
func parseOutput(out []byte, decode func([]byte) error) (*CallError, error) {
	if len(out) == 0 {
		return nil, abiErrorf("empty output (no status byte)")
	}
	status, body := abi.Status(out[0]), out[1:]
	switch {
	case status == abi.StatusOK:
		if err := decode(body); err != nil {
			return nil, abiErrorf("status 0 output is not the expected JSON: %v", err)
		}
		return nil, nil
	case status <= abi.StatusPanic:
		var rep abi.ErrorReply
		if err := json.Unmarshal(body, &rep); err != nil {
			return nil, abiErrorf("status %d output is not an error reply: %v", status, err)
		}
		return &CallError{Status: status, Code: rep.Code, Message: rep.Message, Field: rep.Field}, nil
	default:
		return nil, abiErrorf("unknown status %d", status)
	}
}

// capWriter keeps the first max bytes written since the last reset.
type capWriter struct {
	buf []byte
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *capWriter) reset() { w.buf = w.buf[:0] }

func (w *capWriter) String() string { return string(w.buf) }
