package main

import (
	"encoding/json"
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
	return sdktest.NewEntity(Ledger, "asset", "line-1")
}

func do(t *testing.T, e *sdktest.Entity, command, input string) sdktest.Reply {
	t.Helper()
	r := e.Do(command, input)
	if !r.OK() {
		t.Fatalf("%s %s: %s", command, input, r)
	}
	return r
}

func TestCountsPerSubtype(t *testing.T) {
	t.Parallel()
	e := setup(t)
	do(t, e, "record_invocation", `{"subtype":"call","data":{"to":"+15550100"}}`)
	e.Now += 1000
	do(t, e, "record_invocation", `{}`)
	do(t, e, "record_outcome", `{"subtype":"no_answer","data":{"contact_id":"c1"}}`)
	do(t, e, "append", `{"type":"outcome","subtype":"deal_won","timestamp":1764000005000}`)
	do(t, e, "append", `{"type":"outcome","subtype":"no_answer"}`)
	r := do(t, e, "stats", "")
	want := `{"fact_count":5,"invocations":2,"invocation_counts":{"call":1},"outcomes":3,"outcome_counts":{"deal_won":1,"no_answer":2},"last_fact_at":1764000005000}`
	if string(r.Result) != want {
		t.Fatalf("stats = %s\nwant    %s", r.Result, want)
	}
	if f := e.Facts[2]; f.Type != "outcome" || f.Subtype != "no_answer" || string(f.Data) != `{"contact_id":"c1"}` {
		t.Fatalf("outcome fact %+v %s", f, f.Data)
	}
	rebuilt, err := e.Rebuild()
	if err != nil || string(rebuilt) != string(e.State) {
		t.Fatalf("rebuilt %s (%v), kept %s", rebuilt, err, e.State)
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		command, input string
		status         abi.Status
		code, field    string
	}{
		{"record_outcome", `{}`, abi.StatusBadInput, "required", "subtype"},
		{"record_outcome", `{"subtype":"No Answer"}`, abi.StatusBadInput, "invalid_subtype", "subtype"},
		{"record_invocation", `{"data":[1]}`, abi.StatusBadInput, "invalid_type", "data"},
		{"append", `{"type":"outcome"}`, abi.StatusBadInput, "required", "subtype"},
		{"append", `{"type":"invocation","data":"x"}`, abi.StatusBadInput, "invalid_type", "data"},
		{"append", `{"type":"deposit"}`, abi.StatusBadInput, "unknown_fact_type", "type"},
		{"delete", `{}`, abi.StatusUnknownCommand, "unknown_command", ""},
	} {
		r := e.Do(tc.command, tc.input)
		if r.Status != tc.status || r.Err.Code != tc.code || r.Err.Field != tc.field {
			t.Errorf("%s %s = %s, want %d %s %q", tc.command, tc.input, r, tc.status, tc.code, tc.field)
		}
	}
	if len(e.Facts) != 0 {
		t.Fatal("a refused command recorded facts")
	}
}

func TestEvolveIgnoresOtherTypes(t *testing.T) {
	t.Parallel()
	got, err := sdktest.Evolve(Ledger, json.RawMessage(`{"fact_count":1,"outcomes":1,"outcome_counts":{"x":1}}`), abi.Fact{Type: "note"})
	if err != nil || string(got) != `{"fact_count":1,"invocations":0,"invocation_counts":{},"outcomes":1,"outcome_counts":{"x":1},"last_fact_at":0}` {
		t.Fatalf("evolve = %s, %v", got, err)
	}
}
