package main

import (
	"encoding/json"

	"github.com/factline/factline/sdk"
)

// State is an account's folded ledger:
//
//	{"currency":"USD","balance":1,"totals":{"deposit":1,"charge":0,"credit":0,"payout":0,"cost":0},"fact_count":10}
//
// Sums are exact decimals written as JSON numbers; currency is absent
// until the first money fact fixes it.
type State struct {
	Currency  string
	Balance   sdk.Decimal
	Totals    [kinds]sdk.Decimal
	FactCount int64
}

func (s State) currency() string {
	if s.Currency == "" {
		return DefaultCurrency
	}
	return s.Currency
}

// DecodeJSON implements sdk.Decodable.
func (s *State) DecodeJSON(d *sdk.Decoder) error {
	return d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "currency":
			s.Currency, err = d.String()
		case "balance":
			s.Balance, err = d.Decimal()
		case "fact_count":
			s.FactCount, err = d.Int()
		case "totals":
			err = d.Object(func(key []byte) (err error) {
				switch string(key) {
				case "deposit":
					s.Totals[Deposit], err = d.Decimal()
				case "charge":
					s.Totals[Charge], err = d.Decimal()
				case "credit":
					s.Totals[Credit], err = d.Decimal()
				case "payout":
					s.Totals[Payout], err = d.Decimal()
				case "cost":
					s.Totals[Cost], err = d.Decimal()
				default:
					err = d.Skip()
				}
				return err
			})
		default:
			err = d.Skip()
		}
		return err
	})
}

// EncodeJSON implements sdk.Encodable.
func (s State) EncodeJSON(e *sdk.Encoder) {
	e.BeginObject()
	if s.Currency != "" {
		e.Key("currency")
		e.String(s.Currency)
	}
	s.encodeSums(e)
	e.EndObject()
}

func (s State) encodeSums(e *sdk.Encoder) {
	e.Key("balance")
	e.Decimal(s.Balance)
	e.Key("totals")
	e.BeginObject()
	for k, t := range s.Totals {
		e.Key(kindNames[k])
		e.Decimal(t)
	}
	e.EndObject()
	e.Key("fact_count")
	e.Int(s.FactCount)
}

// Budget is the answer of GET /budget: the state, with the currency a
// command would use when the account has none yet (USD).
type Budget State

// JSONSchema implements sdk.Schemer.
func (Budget) JSONSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"currency":{"type":"string"},` +
		`"balance":{"type":"number","format":"decimal"},` +
		`"totals":{"type":"object","additionalProperties":{"type":"number","format":"decimal"}},` +
		`"fact_count":{"type":"integer"}},"required":["currency","balance","totals","fact_count"]}`)
}

// EncodeJSON implements sdk.Encodable.
func (b Budget) EncodeJSON(e *sdk.Encoder) {
	s := State(b)
	e.BeginObject()
	e.Key("currency")
	e.String(s.currency())
	s.encodeSums(e)
	e.EndObject()
}
