//go:build wasip1

// Command ledger is a well-behaved ledger plugin for the host tests and the
// benchmarks, written against the ABI by hand. It serves entity type
// account with the commands deposit, charge (refused beyond the balance),
// balance (read-only) and panic (a panic recovered into status 5), and
// keeps its state as {"balance": decimal string, "facts": count}.
//
// Build variants: -ldflags=-X=main.version=V changes the version it
// describes and reports; -tags jsondecode makes deposit decode its input
// and encode its result with encoding/json instead of the kit's scanner,
// the way a plugin written without care for the cost would.
package main

import (
	"strconv"

	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

var version = "1.0.0"

func main() {}

//go:wasmexport factline_abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport factline_alloc
func alloc(size uint32) uint32 { return kit.Alloc(size) }

//go:wasmexport factline_free
func free(ptr, size uint32) {}

//go:wasmexport factline_describe
func describe() uint64 {
	b := kit.Out(abi.StatusOK)
	b = append(b, `{"abi":1,"name":"ledger","version":`...)
	b = kit.AppendString(b, version)
	b = append(b, `,"kind":"ledger","entity_types":["account"],"commands":[`+
		`{"name":"deposit","method":"POST","path":"/deposit","emits":["deposit"],"description":"Record a deposit"},`+
		`{"name":"charge","method":"POST","path":"/charge","emits":["charge"]},`+
		`{"name":"balance","method":"GET","path":"/balance","read_only":true}],`+
		`"emits":["deposit","charge"]}`...)
	return kit.Done(b)
}

//go:wasmexport factline_decide
func decide(ptr, n uint32) (packed uint64) {
	defer func() {
		if r := recover(); r != nil {
			packed = kit.Recovered(r)
		}
	}()
	in := kit.Input(ptr, n)
	// One pass over the top level. The host sends state last, so a
	// deposit, which does not need it, never reads that far.
	var command, input, state []byte
	o := kit.NewObject(in)
	for o.Next() {
		switch string(o.Key) {
		case "command":
			command, _ = kit.String(o.Value)
		case "input":
			input = o.Value
		case "state":
			state = o.Value
		}
		if string(command) == "deposit" && input != nil {
			break
		}
	}
	if o.Err != nil {
		return kit.Error(abi.StatusBadInput, "bad_input", o.Err.Error())
	}
	switch string(command) {
	case "deposit":
		return deposit(in, input)
	case "charge":
		return charge(input, state)
	case "balance":
		return balance(state)
	case "panic":
		panic("deliberate panic in decide")
	case abi.CommandAppend:
		return kit.Error(abi.StatusBusinessError, "raw_append_refused", "account facts are recorded through commands")
	default:
		return kit.Error(abi.StatusUnknownCommand, "unknown_command", "unknown command "+string(command))
	}
}

// field returns the raw value of key in object b (nil when absent).
func field(b []byte, key string) []byte {
	o := kit.NewObject(b)
	for o.Next() {
		if string(o.Key) == key {
			return o.Value
		}
	}
	return nil
}

// amountOf reads a decimal given as a JSON string or number.
func amountOf(raw []byte) (digits []byte, micros int64, ok bool) {
	digits = raw
	if s, isString := kit.String(raw); isString {
		digits = s
	}
	micros, ok = parseDecimal(digits)
	return digits, micros, ok
}

func charge(input, state []byte) uint64 {
	_, amt, ok := amountOf(field(input, "amount"))
	if !ok || amt <= 0 {
		return kit.ErrorField(abi.StatusBadInput, "invalid_amount", "amount must be a positive decimal", "amount")
	}
	bal, _, err := readState(state)
	if err != "" {
		return kit.ErrorField(abi.StatusBadInput, "bad_state", err, "state")
	}
	if amt > bal {
		return kit.ErrorField(abi.StatusBusinessError, "insufficient_funds",
			"charge of "+formatDecimal(amt)+" exceeds the balance "+formatDecimal(bal), "amount")
	}
	b := kit.Out(abi.StatusOK)
	b = append(b, `{"facts":[{"type":"charge","data":{"amount":"`...)
	b = append(b, formatDecimal(amt)...)
	b = append(b, `"}}]}`...)
	return kit.Done(b)
}

func balance(state []byte) uint64 {
	bal, facts, err := readState(state)
	if err != "" {
		return kit.ErrorField(abi.StatusBadInput, "bad_state", err, "state")
	}
	b := kit.Out(abi.StatusOK)
	b = append(b, `{"result":`...)
	b = appendState(b, bal, facts)
	b = append(b, '}')
	return kit.Done(b)
}

// readState reads {"balance","facts"}; null is the empty state.
func readState(raw []byte) (balance, facts int64, err string) {
	if raw == nil || string(raw) == "null" {
		return 0, 0, ""
	}
	o := kit.NewObject(raw)
	for o.Next() {
		switch string(o.Key) {
		case "balance":
			var ok bool
			if _, balance, ok = amountOf(o.Value); !ok {
				return 0, 0, "bad balance"
			}
		case "facts":
			n, perr := strconv.ParseInt(string(o.Value), 10, 64)
			if perr != nil {
				return 0, 0, "bad facts count"
			}
			facts = n
		}
	}
	if o.Err != nil {
		return 0, 0, o.Err.Error()
	}
	return balance, facts, ""
}

func appendState(b []byte, balance, facts int64) []byte {
	b = append(b, `{"balance":"`...)
	b = append(b, formatDecimal(balance)...)
	b = append(b, `","facts":`...)
	b = strconv.AppendInt(b, facts, 10)
	return append(b, '}')
}

//go:wasmexport factline_evolve
func evolve(ptr, n uint32) uint64 {
	var state, fact []byte
	o := kit.NewObject(kit.Input(ptr, n))
	for o.Next() {
		switch string(o.Key) {
		case "state":
			state = o.Value
		case "fact":
			fact = o.Value
		}
	}
	if o.Err != nil || fact == nil {
		return kit.Error(abi.StatusBadInput, "bad_input", "want {state, fact}")
	}
	bal, facts, err := readState(state)
	if err != "" {
		return kit.ErrorField(abi.StatusBadInput, "bad_state", err, "state")
	}
	typ, _ := kit.String(field(fact, "type"))
	_, amt, ok := amountOf(field(field(fact, "data"), "amount"))
	if !ok {
		return kit.ErrorField(abi.StatusBadInput, "bad_fact", "amount must be a decimal", "fact.data.amount")
	}
	switch string(typ) {
	case "deposit":
		bal += amt
	case "charge":
		bal -= amt
	default:
		return kit.ErrorField(abi.StatusBadInput, "unknown_fact_type", "unknown fact type "+string(typ), "fact.type")
	}
	return kit.Done(appendState(kit.Out(abi.StatusOK), bal, facts+1))
}

//go:wasmexport factline_handle
func handle(ptr, n uint32) uint64 {
	return kit.Error(abi.StatusUnsupported, "unsupported", "a ledger has no handlers")
}

// Decimals are fixed-point millionths, which is enough for a test ledger.

func parseDecimal(s []byte) (int64, bool) {
	if ok, _ := kit.Decimal(s); !ok || len(s) > 18 {
		return 0, false
	}
	var whole, frac int64
	scale := int64(1_000_000)
	seenDot := false
	for _, c := range s {
		switch {
		case c == '.':
			seenDot = true
		case !seenDot:
			whole = whole*10 + int64(c-'0')
		default:
			if scale /= 10; scale == 0 {
				return 0, false // more than six decimals
			}
			frac += int64(c-'0') * scale
		}
	}
	return whole*1_000_000 + frac, true
}

// formatDecimal writes at least two decimals and at most six.
func formatDecimal(v int64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	frac := strconv.FormatInt(1_000_000+v%1_000_000, 10)[1:]
	for len(frac) > 2 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	s := strconv.FormatInt(v/1_000_000, 10) + "." + frac
	if neg {
		s = "-" + s
	}
	return s
}
