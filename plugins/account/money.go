package main

import (
	"encoding/json"

	"github.com/factline/factline/sdk"
)

// Kind is one of the account's fact types.
type Kind int

// The fact types, in the order of kindNames.
const (
	Deposit Kind = iota
	Charge
	Credit
	Payout
	Cost
	kinds
)

var kindNames = [kinds]string{"deposit", "charge", "credit", "payout", "cost"}

func (k Kind) String() string { return kindNames[k] }

// credits reports whether the kind adds to the balance.
func (k Kind) credits() bool { return k == Deposit || k == Credit }

func kindOf(t string) (Kind, bool) {
	for k, n := range kindNames {
		if n == t {
			return Kind(k), true
		}
	}
	return 0, false
}

// DefaultCurrency is the currency of an account whose first money fact
// names none.
const DefaultCurrency = "USD"

// MaxAmount is the largest amount of one fact.
var MaxAmount = sdk.MustDecimal("1e15")

// Money is the input of a money command and the data of a money fact:
// {"amount": 12.5, "currency": "USD", "allow_overdraft": true, ...}. Other
// fields are kept as they are.
type Money struct {
	Amount         sdk.Decimal
	Currency       string
	AllowOverdraft bool
	Extra          []Field // other members, in input order

	hasAmount bool
}

// Field is a member of the input kept in the fact's data.
type Field struct {
	Key   string
	Value []byte // JSON text
}

// JSONSchema implements sdk.Schemer: DecodeJSON keeps other members as
// they are, so the object is open.
func (Money) JSONSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","format":"decimal"},` +
		`"currency":{"type":"string"},"allow_overdraft":{"type":"boolean"}},"required":["amount"]}`)
}

// DecodeJSON implements sdk.Decodable.
func (m *Money) DecodeJSON(d *sdk.Decoder) error {
	if d.Peek() != '{' {
		return sdk.Invalid("", "invalid_type", "expected an object with an amount")
	}
	return d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "amount":
			m.Amount, err = d.Decimal()
			m.hasAmount = err == nil
		case "currency":
			m.Currency, err = d.String()
		case "allow_overdraft":
			m.AllowOverdraft, err = d.Bool()
		default:
			var v []byte
			if v, err = d.Raw(); err == nil {
				m.Extra = append(m.Extra, Field{Key: string(key), Value: v})
			}
		}
		return err
	})
}

// EncodeJSON implements sdk.Encodable.
func (m Money) EncodeJSON(e *sdk.Encoder) {
	e.BeginObject()
	e.Key("amount")
	e.Decimal(m.Amount)
	e.Key("currency")
	e.String(m.Currency)
	if m.AllowOverdraft {
		e.Key("allow_overdraft")
		e.Bool(true)
	}
	for _, f := range m.Extra {
		e.Key(f.Key)
		e.Raw(f.Value)
	}
	e.EndObject()
}

// admit checks a money fact of kind k against the rules and the state and
// returns it with its currency filled in. prefix goes before field names
// in errors ("data." for raw appends).
func (s State) admit(k Kind, m Money, prefix string) (Money, error) {
	switch {
	case !m.hasAmount:
		return m, sdk.Invalid(prefix+"amount", "required", "amount is required")
	case m.Amount.Sign() <= 0:
		return m, sdk.Invalid(prefix+"amount", "not_positive", "amount must be greater than 0")
	case m.Amount.Cmp(MaxAmount) > 0:
		return m, sdk.Invalid(prefix+"amount", "too_large", "amount must be at most "+MaxAmount.String())
	}
	if m.Currency == "" {
		m.Currency = s.currency()
	} else if !validCurrency(m.Currency) {
		return m, sdk.Invalid(prefix+"currency", "invalid_currency", "currency must be three capital letters (ISO 4217), like USD")
	}
	if s.Currency != "" && m.Currency != s.Currency {
		return m, sdk.Refuse("currency_mismatch", "the account is in "+s.Currency+"; a "+k.String()+" in "+m.Currency+" is refused")
	}
	if !k.credits() && !m.AllowOverdraft && s.Balance.Sub(m.Amount).Sign() < 0 {
		return m, sdk.Refuse("insufficient_funds", "a "+k.String()+" of "+m.Amount.String()+" "+m.Currency+
			" exceeds the balance of "+s.Balance.String()+" "+m.Currency+"; send \"allow_overdraft\": true to allow it")
	}
	return m, nil
}

func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}
