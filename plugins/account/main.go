// Command account is the ledger plugin of entity type account: the money
// an account holds with the platform.
//
// Fact types: deposit and credit add to the balance; charge, payout and
// cost take from it. Every fact's data carries an exact decimal amount
// and a currency. The rules:
//
//   - amounts are positive decimals, at most 10^15 and 18 decimal places;
//   - the first money fact fixes the account's currency; a fact in another
//     currency is refused (currency_mismatch). A command without currency
//     uses the account's, or USD for an account with none yet;
//   - a charge, payout or cost beyond the balance is refused
//     (insufficient_funds) unless its input sets "allow_overdraft": true,
//     which the fact records: overdraft is authorised per fact by the
//     caller, so the history shows every fact that took the balance below
//     zero.
//
// Commands: deposit, charge, credit, payout, cost (POST /<name>, input
// {amount, currency?, allow_overdraft?, ...more fields kept in the fact
// data}; subtype manual), budget (GET /budget) and the raw append of any
// of the five fact types under the same rules.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() { sdk.Register(Ledger) }

// version is the plugin's version; release builds may set it with
// -ldflags "-X main.version=...".
var version = "1.0.0"

// Ledger is the plugin.
var Ledger = &sdk.Ledger[State]{
	Name:        "account",
	Version:     version,
	EntityTypes: []string{"account"},
	Emits:       kindNames[:],
	Commands: []sdk.Decider[State]{
		money(Deposit, "Record a deposit"),
		money(Charge, "Charge the account"),
		money(Credit, "Credit the account"),
		money(Payout, "Pay money out of the account"),
		money(Cost, "Record a cost borne by the account"),
		sdk.Read(sdk.Command{Name: "budget", Method: "GET", Path: "/budget", Description: "The account's balance and totals"}, budget),
		sdk.Write(sdk.Command{Name: "append", Description: "Raw append of a deposit, charge, credit, payout or cost"}, appendFact),
	},
	Evolve: evolve,
}

// money declares the command that records one kind of money fact.
func money(k Kind, description string) sdk.Decider[State] {
	name := k.String()
	return sdk.Write(sdk.Command{Name: name, Method: "POST", Path: "/" + name, Description: description, Emits: []string{name}},
		func(s State, cmd sdk.Cmd[Money]) ([]sdk.NewFact, error) {
			m, err := s.admit(k, cmd.Input, "")
			if err != nil {
				return nil, err
			}
			return []sdk.NewFact{{Type: name, Subtype: "manual", Data: m}}, nil
		})
}

func budget(s State, _ sdk.Cmd[struct{}]) (Budget, error) { return Budget(s), nil }

func appendFact(s State, cmd sdk.Cmd[sdk.AppendInput]) ([]sdk.NewFact, error) {
	in := cmd.Input
	k, ok := kindOf(in.Type)
	if !ok {
		return nil, sdk.Invalid("type", "unknown_fact_type", "an account records deposit, charge, credit, payout and cost facts, not "+quote(in.Type))
	}
	var m Money
	if err := in.DecodeData(&m); err != nil {
		return nil, err
	}
	m, err := s.admit(k, m, "data.")
	if err != nil {
		return nil, err
	}
	return []sdk.NewFact{{Type: k.String(), Subtype: in.Subtype, Data: m, Timestamp: in.Timestamp}}, nil
}

func evolve(s State, f sdk.Fact) State {
	k, ok := kindOf(f.Type)
	if !ok {
		return s
	}
	s.FactCount++
	var m Money
	if err := f.Decode(&m); err != nil || !m.hasAmount {
		return s // data no decide of this ledger wrote: counted, no money
	}
	cur := m.Currency
	if cur == "" {
		cur = s.currency()
	}
	if s.Currency == "" {
		s.Currency = cur
	} else if cur != s.Currency {
		return s
	}
	s.Totals[k] = s.Totals[k].Add(m.Amount)
	if k.credits() {
		s.Balance = s.Balance.Add(m.Amount)
	} else {
		s.Balance = s.Balance.Sub(m.Amount)
	}
	return s
}

func quote(s string) string { return `"` + s + `"` }
