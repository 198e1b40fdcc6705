//go:build wasip1 && !jsondecode

package main

import (
	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

// deposit is the decide step of the benchmarks: read input.amount and
// input.currency with the kit's scanner, check the amount, emit one
// deposit fact. It allocates nothing.
func deposit(_, input []byte) uint64 {
	if input == nil {
		return kit.ErrorField(abi.StatusBadInput, "bad_input", "input must be an object", "input")
	}
	var amount, currency []byte
	o := kit.NewObject(input)
	for o.Next() {
		switch string(o.Key) {
		case "amount":
			amount = o.Value
		case "currency":
			currency = o.Value
		}
	}
	if o.Err != nil {
		return kit.ErrorField(abi.StatusBadInput, "bad_input", "input: "+o.Err.Error(), "input")
	}
	digits := amount
	if s, ok := kit.String(amount); ok {
		digits = s
	}
	ok, positive := kit.Decimal(digits)
	if !ok {
		return kit.ErrorField(abi.StatusBadInput, "invalid_amount", "amount must be a decimal", "amount")
	}
	if !positive {
		return kit.ErrorField(abi.StatusBusinessError, "non_positive_amount", "amount must be above zero", "amount")
	}
	cur := []byte("USD")
	if currency != nil {
		c, ok := kit.String(currency)
		if !ok || len(c) != 3 || c[0] < 'A' || c[0] > 'Z' || c[1] < 'A' || c[1] > 'Z' || c[2] < 'A' || c[2] > 'Z' {
			return kit.ErrorField(abi.StatusBadInput, "invalid_currency", "currency must be a 3-letter code", "currency")
		}
		cur = c
	}
	b := kit.Out(abi.StatusOK)
	b = append(b, `{"facts":[{"type":"deposit","subtype":"manual","data":{"amount":"`...)
	b = append(b, digits...)
	b = append(b, `","currency":"`...)
	b = append(b, cur...)
	b = append(b, `"}}],"result":{"plugin_version":"`...)
	b = append(b, version...)
	b = append(b, `"}}`...)
	return kit.Done(b)
}
