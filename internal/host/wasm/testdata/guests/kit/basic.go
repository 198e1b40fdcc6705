//go:build wasip1

package kit

import (
	"github.com/factline/factline/sdk/abi"
)

// The guests avoid encoding/json and fmt (except the ledger built with
// the jsondecode tag): each package adds code that wazero compiles at
// every cold load, and a test run under the race detector compiles about
// ten of these modules.

// Command returns the command of a decide input ("" when there is none).
func Command(in []byte) string {
	o := NewObject(in)
	for o.Next() {
		if string(o.Key) == "command" {
			s, _ := String(o.Value)
			return string(s)
		}
	}
	return ""
}

// Ledger is the describe document of a one-type ledger called name.
func Ledger(name string) uint64 {
	b := Out(abi.StatusOK)
	b = append(b, `{"abi":1,"name":`...)
	b = AppendString(b, name)
	b = append(b, `,"version":"0.1.0","kind":"ledger","entity_types":["account"],`+
		`"commands":[{"name":"ok","method":"POST","path":"/ok","emits":["noted"]}],"emits":["noted"]}`...)
	return Done(b)
}

// OK replies to a decide with one "noted" fact and {"guest": name}.
func OK(name string) uint64 {
	b := Out(abi.StatusOK)
	b = append(b, `{"facts":[{"type":"noted"}],"result":{"guest":`...)
	b = AppendString(b, name)
	b = append(b, `}}`...)
	return Done(b)
}

// State replies to an evolve with an empty object.
func State() uint64 { return Reply(abi.StatusOK, []byte(`{}`)) }

// Unsupported replies status 4.
func Unsupported() uint64 {
	return Error(abi.StatusUnsupported, "unsupported", "not implemented by this guest")
}

// Recovered turns a recovered panic value into a status 5 reply.
func Recovered(r any) uint64 {
	msg := "panic"
	switch v := r.(type) {
	case string:
		msg = v
	case error:
		msg = v.Error()
	}
	return Error(abi.StatusPanic, "panic", msg)
}

// ErrorField replies with a status 1-5 and an error document naming the
// input field at fault.
func ErrorField(status abi.Status, code, message, field string) uint64 {
	b := Out(status)
	b = append(b, `{"code":`...)
	b = AppendString(b, code)
	b = append(b, `,"message":`...)
	b = AppendString(b, message)
	if field != "" {
		b = append(b, `,"field":`...)
		b = AppendString(b, field)
	}
	b = append(b, '}')
	return Done(b)
}
