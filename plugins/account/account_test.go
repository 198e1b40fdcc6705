package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
	"github.com/factline/factline/sdk/sdktest"
)

func setup(t *testing.T) *sdktest.Entity {
	t.Helper()
	if err := sdk.Check(Ledger); err != nil {
		t.Fatal(err)
	}
	return sdktest.NewEntity(Ledger, "account", "acct-1")
}

// do runs a command that must succeed.
func do(t *testing.T, e *sdktest.Entity, command, input string) sdktest.Reply {
	t.Helper()
	r := e.Do(command, input)
	if !r.OK() {
		t.Fatalf("%s %s: %s", command, input, r)
	}
	return r
}

// refused runs a command that must fail with status and code, and checks
// that nothing was recorded.
func refused(t *testing.T, e *sdktest.Entity, command, input string, status abi.Status, code, field string) {
	t.Helper()
	before := len(e.Facts)
	r := e.Do(command, input)
	if r.Status != status || r.Err == nil || r.Err.Code != code || r.Err.Field != field {
		t.Fatalf("%s %s: %s, want status %d code %s field %q", command, input, r, status, code, field)
	}
	if len(e.Facts) != before {
		t.Fatalf("%s %s recorded facts", command, input)
	}
}

func budgetOf(t *testing.T, e *sdktest.Entity) map[string]any {
	t.Helper()
	r := do(t, e, "budget", "")
	var b map[string]any
	d := json.NewDecoder(strings.NewReader(string(r.Result)))
	d.UseNumber()
	if err := d.Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDepositTenTimesIsExactlyOne(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for range 10 {
		r := do(t, e, "deposit", `{"amount":0.1}`)
		if f := r.Facts[0]; f.Type != "deposit" || f.Subtype != "manual" || string(f.Data) != `{"amount":0.1,"currency":"USD"}` {
			t.Fatalf("fact = %+v %s", f, f.Data)
		}
	}
	r := do(t, e, "budget", "")
	want := `{"currency":"USD","balance":1,"totals":{"deposit":1,"charge":0,"credit":0,"payout":0,"cost":0},"fact_count":10}`
	if string(r.Result) != want {
		t.Fatalf("budget = %s\nwant     %s", r.Result, want)
	}
	if len(r.Facts) != 0 {
		t.Fatal("budget recorded facts")
	}
}

func TestBudgetOfNewAccount(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := do(t, e, "budget", "")
	if want := `{"currency":"USD","balance":0,"totals":{"deposit":0,"charge":0,"credit":0,"payout":0,"cost":0},"fact_count":0}`; string(r.Result) != want {
		t.Fatalf("budget = %s", r.Result)
	}
}

func TestMoneyFlow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	do(t, e, "deposit", `{"amount":"100.00","currency":"EUR","reference":"inv-7"}`)
	if got := string(e.Facts[0].Data); got != `{"amount":100,"currency":"EUR","reference":"inv-7"}` {
		t.Fatalf("deposit data = %s", got)
	}
	do(t, e, "charge", `{"amount":30.5}`) // the account's currency
	do(t, e, "credit", `{"amount":0.5,"currency":"EUR"}`)
	do(t, e, "payout", `{"amount":20}`)
	do(t, e, "cost", `{"amount":0.25}`)
	b := budgetOf(t, e)
	totals := b["totals"].(map[string]any)
	if b["balance"] != json.Number("49.75") || b["currency"] != "EUR" || b["fact_count"] != json.Number("5") ||
		totals["deposit"] != json.Number("100") || totals["charge"] != json.Number("30.5") || totals["credit"] != json.Number("0.5") ||
		totals["payout"] != json.Number("20") || totals["cost"] != json.Number("0.25") {
		t.Fatalf("budget = %v", b)
	}
	for _, f := range e.Facts[1:] {
		if f.Subtype != "manual" || !strings.Contains(string(f.Data), `"currency":"EUR"`) {
			t.Fatalf("fact %s/%s %s", f.Type, f.Subtype, f.Data)
		}
	}
}

func TestCurrencyIsFixedByTheFirstMoneyFact(t *testing.T) {
	t.Parallel()
	e := setup(t)
	do(t, e, "deposit", `{"amount":1}`) // USD by default
	refused(t, e, "deposit", `{"amount":1,"currency":"EUR"}`, abi.StatusBusinessError, "currency_mismatch", "")
	refused(t, e, "append", `{"type":"credit","data":{"amount":1,"currency":"GBP"}}`, abi.StatusBusinessError, "currency_mismatch", "")
	do(t, e, "deposit", `{"amount":1,"currency":"USD"}`)
}

func TestOverdraft(t *testing.T) {
	t.Parallel()
	e := setup(t)
	do(t, e, "deposit", `{"amount":10}`)
	for _, kind := range []string{"charge", "payout", "cost"} {
		refused(t, e, kind, `{"amount":10.01}`, abi.StatusBusinessError, "insufficient_funds", "")
	}
	do(t, e, "charge", `{"amount":10}`) // down to exactly zero
	r := do(t, e, "charge", `{"amount":5,"allow_overdraft":true}`)
	if got := string(r.Facts[0].Data); got != `{"amount":5,"currency":"USD","allow_overdraft":true}` {
		t.Fatalf("overdraft fact = %s", got)
	}
	if b := budgetOf(t, e); b["balance"] != json.Number("-5") {
		t.Fatalf("balance = %v", b["balance"])
	}
	refused(t, e, "cost", `{"amount":1}`, abi.StatusBusinessError, "insufficient_funds", "")
	do(t, e, "credit", `{"amount":1}`) // credits are never refused for the balance
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct{ command, input, code, field string }{
		{"deposit", `{}`, "required", "amount"},
		{"deposit", ``, "required", "amount"},
		{"deposit", `{"amount":0}`, "not_positive", "amount"},
		{"deposit", `{"amount":-3}`, "not_positive", "amount"},
		{"deposit", `{"amount":"lots"}`, "invalid_decimal", "amount"},
		{"deposit", `{"amount":1e16}`, "too_large", "amount"},
		{"deposit", `{"amount":0.0000000000000000001}`, "invalid_decimal", "amount"},
		{"deposit", `{"amount":1,"currency":"usd"}`, "invalid_currency", "currency"},
		{"deposit", `{"amount":1,"currency":7}`, "invalid_type", "currency"},
		{"charge", `{"amount":1,"allow_overdraft":"yes"}`, "invalid_type", "allow_overdraft"},
		{"deposit", `[1]`, "invalid_type", ""},
		{"append", `{"type":"refund","data":{"amount":1}}`, "unknown_fact_type", "type"},
		{"append", `{"type":"deposit","data":{"amount":-1}}`, "not_positive", "data.amount"},
		{"append", `{"type":"deposit"}`, "invalid_type", "data"},
		{"append", `{"type":"deposit","data":{"amount":"x"}}`, "invalid_decimal", "data.amount"},
	} {
		refused(t, e, tc.command, tc.input, abi.StatusBadInput, tc.code, tc.field)
	}
	refused(t, e, "transfer", `{}`, abi.StatusUnknownCommand, "unknown_command", "")
}

func TestAppend(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := do(t, e, "append", `{"type":"deposit","subtype":"wire","timestamp":1700000000000,"data":{"amount":"5.10","bank":{"ref":"x"}}}`)
	f := r.Recorded[0]
	if f.Type != "deposit" || f.Subtype != "wire" || f.Timestamp != 1700000000000 || string(f.Data) != `{"amount":5.1,"currency":"USD","bank":{"ref":"x"}}` {
		t.Fatalf("appended %+v %s", f, f.Data)
	}
	refused(t, e, "append", `{"type":"payout","data":{"amount":6}}`, abi.StatusBusinessError, "insufficient_funds", "")
	do(t, e, "append", `{"type":"payout","data":{"amount":6,"allow_overdraft":true}}`)
	if b := budgetOf(t, e); b["balance"] != json.Number("-0.9") {
		t.Fatalf("balance = %v", b["balance"])
	}
}

// TestReplay checks that replaying the recorded facts rebuilds the state
// decide and evolve kept, as the host does after a plugin upgrade.
func TestReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range [][2]string{
		{"deposit", `{"amount":12.34}`}, {"charge", `{"amount":2.34}`}, {"credit", `{"amount":"0.005"}`},
		{"append", `{"type":"cost","data":{"amount":1}}`}, {"payout", `{"amount":100,"allow_overdraft":true}`},
	} {
		do(t, e, c[0], c[1])
	}
	rebuilt, err := e.Rebuild()
	if err != nil {
		t.Fatal(err)
	}
	if string(rebuilt) != string(e.State) {
		t.Fatalf("rebuilt %s\nkept    %s", rebuilt, e.State)
	}
}

// TestEvolveIsTotal: facts this ledger did not write (for example recorded
// by an earlier ledger) are counted and change no sums.
func TestEvolveIsTotal(t *testing.T) {
	t.Parallel()
	for _, data := range []string{``, `{}`, `{"amount":"x"}`, `[1]`, `{"amount":1,"currency":"EUR"}`} {
		state := json.RawMessage(`{"currency":"USD","balance":1,"totals":{"deposit":1},"fact_count":1}`)
		f := abi.Fact{ID: "f", Type: "deposit", Data: json.RawMessage(data)}
		got, err := sdktest.Evolve(Ledger, state, f)
		if err != nil {
			t.Fatalf("evolve %s: %v", data, err)
		}
		if want := `{"currency":"USD","balance":1,"totals":{"deposit":1,"charge":0,"credit":0,"payout":0,"cost":0},"fact_count":2}`; string(got) != want {
			t.Fatalf("evolve %s = %s", data, got)
		}
	}
	got, err := sdktest.Evolve(Ledger, nil, abi.Fact{ID: "f", Type: "unrelated"})
	if err != nil || string(got) != `{"balance":0,"totals":{"deposit":0,"charge":0,"credit":0,"payout":0,"cost":0},"fact_count":0}` {
		t.Fatalf("evolve of another type = %s, %v", got, err)
	}
}

func TestStateAcceptsDecimalStrings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.State = json.RawMessage(`{"currency":"USD","balance":"3.5","totals":{"deposit":"3.5","other":1},"fact_count":1,"future_field":true}`)
	refused(t, e, "charge", `{"amount":4}`, abi.StatusBusinessError, "insufficient_funds", "")
	do(t, e, "charge", `{"amount":3.5}`)
	if b := budgetOf(t, e); b["balance"] != json.Number("0") {
		t.Fatalf("balance = %v", b["balance"])
	}
	e.State = json.RawMessage(`{"balance":"lots"}`)
	r := e.Do("budget", "")
	if r.Status != abi.StatusBadInput || r.Err.Code != "invalid_state" || r.Err.Field != "state.balance" {
		t.Fatalf("bad state: %s", r)
	}
}
