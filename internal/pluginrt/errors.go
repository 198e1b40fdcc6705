package pluginrt

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/factline/factline/sdk/abi"
)

// ErrClosed is returned by calls into a plugin (or host) that has been
// closed and, for a plugin, replaced by nothing.
var ErrClosed = errors.New("wasm: closed")

// ErrInvalidInput wraps the error of a call whose input cannot be encoded
// (a state, input or fact data that is not valid JSON). No guest code ran.
var ErrInvalidInput = errors.New("wasm: invalid input")

// ErrNoPrevious is returned by Registry.Rollback when there is no version
// to go back to.
var ErrNoPrevious = errors.New("wasm: no previous version")

// LoadError refuses a module. Reasons lists every problem found, each a
// sentence an operator can act on.
type LoadError struct {
	Reasons []string
}

func (e *LoadError) Error() string {
	switch len(e.Reasons) {
	case 0:
		return "wasm: plugin refused"
	case 1:
		return "wasm: plugin refused: " + e.Reasons[0]
	}
	return fmt.Sprintf("wasm: plugin refused (%d problems): %s", len(e.Reasons), strings.Join(e.Reasons, "; "))
}

// CallError is an error reply of a guest (statuses 1-5 of sdk/ABI.md). The
// instance that answered stays in service.
type CallError struct {
	Status  abi.Status
	Code    string
	Message string
	Field   string
}

func (e *CallError) Error() string {
	s := fmt.Sprintf("wasm: %s (%s)", e.Code, StatusName(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Field != "" {
		s += " [field " + e.Field + "]"
	}
	return s
}

// StatusName names an ABI status: "business_error", "bad_input",
// "unknown_command", "unsupported", "panic" (and "ok").
func StatusName(s abi.Status) string {
	switch s {
	case abi.StatusOK:
		return "ok"
	case abi.StatusBusinessError:
		return "business_error"
	case abi.StatusBadInput:
		return "bad_input"
	case abi.StatusUnknownCommand:
		return "unknown_command"
	case abi.StatusUnsupported:
		return "unsupported"
	case abi.StatusPanic:
		return "panic"
	}
	return fmt.Sprintf("status_%d", byte(s))
}

// TrapError is a call that did not end in a reply: the guest trapped
// (unrecovered panic, Go runtime fatal error, out-of-bounds access, memory
// exhaustion), broke the ABI (a pointer out of bounds, a malformed or
// oversized output), ran past its deadline (Timeout), or was stopped
// because the caller's context ended. The instance was discarded and a
// fresh one is being made in the background; only this call failed.
type TrapError struct {
	Plugin  string // name@version
	Call    string // decide, evolve, handle
	Timeout bool   // the call's deadline (or the caller's) expired
	Cause   error
	// Output is the start of what the guest wrote to stdout and stderr
	// during the call (at most 2 KiB): for a Go guest, the panic message
	// or the runtime's fatal error.
	Output string
	// Memory is the instance's linear memory in bytes when the call
	// ended, and MemoryCap the most it could have grown to.
	Memory, MemoryCap uint64
}

// NearMemoryCap reports whether the instance had grown its memory to
// within an eighth of its cap. A Go guest that allocates there runs its
// collector ever more often, so a call stopped by the deadline there was
// most likely running out of memory rather than computing.
func (e *TrapError) NearMemoryCap() bool {
	return e.MemoryCap > 0 && e.Memory >= e.MemoryCap-e.MemoryCap/8
}

func (e *TrapError) Error() string {
	what := "trapped"
	switch {
	case e.Timeout:
		what = "timed out"
	case errors.Is(e.Cause, context.Canceled):
		what = "canceled"
	}
	msg := fmt.Sprintf("wasm: %s %s %s: %v", e.Plugin, e.Call, what, e.Cause)
	if e.Timeout && e.NearMemoryCap() {
		msg += fmt.Sprintf(" (with %.1f of its %d MiB of memory in use: most likely running out of memory)",
			float64(e.Memory)/(1<<20), e.MemoryCap>>20)
	}
	return msg
}

func (e *TrapError) Unwrap() error { return e.Cause }

var (
	_ error = (*LoadError)(nil)
	_ error = (*CallError)(nil)
	_ error = (*TrapError)(nil)
)
