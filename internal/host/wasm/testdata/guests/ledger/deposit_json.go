//go:build wasip1 && jsondecode

package main

import (
	"encoding/json"

	"github.com/factline/factline/internal/host/wasm/testdata/guests/kit"
	"github.com/factline/factline/sdk/abi"
)

type depositInput struct {
	Amount   json.Number `json:"amount"`
	Currency string      `json:"currency"`
}

// deposit is the same decide step written the obvious way: the whole
// input decoded with encoding/json into the ABI's types, the result
// encoded with it.
func deposit(in, _ []byte) uint64 {
	var cmd abi.DecideInput
	if err := json.Unmarshal(in, &cmd); err != nil {
		return kit.ErrorField(abi.StatusBadInput, "bad_input", err.Error(), "")
	}
	var input depositInput
	if err := json.Unmarshal(cmd.Input, &input); err != nil {
		return kit.ErrorField(abi.StatusBadInput, "bad_input", err.Error(), "input")
	}
	ok, positive := kit.Decimal([]byte(input.Amount))
	if !ok {
		return kit.ErrorField(abi.StatusBadInput, "invalid_amount", "amount must be a decimal", "amount")
	}
	if !positive {
		return kit.ErrorField(abi.StatusBusinessError, "non_positive_amount", "amount must be above zero", "amount")
	}
	if input.Currency == "" {
		input.Currency = "USD"
	}
	if c := input.Currency; len(c) != 3 || c[0] < 'A' || c[0] > 'Z' || c[1] < 'A' || c[1] > 'Z' || c[2] < 'A' || c[2] > 'Z' {
		return kit.ErrorField(abi.StatusBadInput, "invalid_currency", "currency must be a 3-letter code", "currency")
	}
	data, _ := json.Marshal(struct {
		Amount   string `json:"amount"`
		Currency string `json:"currency"`
	}{string(input.Amount), input.Currency})
	res, _ := json.Marshal(struct {
		PluginVersion string `json:"plugin_version"`
	}{version})
	b, _ := json.Marshal(abi.DecideResult{
		Facts:  []abi.NewFact{{Type: "deposit", Subtype: "manual", Data: data}},
		Result: res,
	})
	return kit.Reply(abi.StatusOK, b)
}
