package main

import (
	"testing"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
	"github.com/factline/factline/sdk/sdktest"
)

func TestServesSixTypes(t *testing.T) {
	t.Parallel()
	if err := sdk.Check(Ledger); err != nil {
		t.Fatal(err)
	}
	d := Ledger.Description()
	want := []string{"campaign", "contact", "deal", "tool", "user", "vendor"}
	if len(d.EntityTypes) != len(want) {
		t.Fatalf("entity types %v", d.EntityTypes)
	}
	for i := range want {
		if d.EntityTypes[i] != want[i] {
			t.Fatalf("entity types %v", d.EntityTypes)
		}
	}
}

func TestAppendAndSummary(t *testing.T) {
	t.Parallel()
	for typ, facts := range domainFacts(t) {
		e := sdktest.NewEntity(Ledger, typ, typ+"-1")
		for i, f := range facts {
			e.Now = sdktest.Now + int64(i)
			if r := e.Do("append", `{"type":"`+f+`","subtype":"s","data":{"i":1}}`); !r.OK() {
				t.Fatalf("%s append %s: %s", typ, f, r)
			}
		}
		e.Do("append", `{"type":"`+facts[0]+`"}`)
		r := e.Decide("summary", "")
		if !r.OK() {
			t.Fatal(r)
		}
		rebuilt, err := e.Rebuild()
		if err != nil || string(rebuilt) != string(e.State) || string(r.Result) != string(e.State) {
			t.Fatalf("%s: summary %s, state %s, rebuilt %s (%v)", typ, r.Result, e.State, rebuilt, err)
		}
	}
	e := sdktest.NewEntity(Ledger, "contact", "c1")
	e.Do("append", `{"type":"note","timestamp":5}`)
	e.Do("append", `{"type":"note"}`)
	e.Do("append", `{"type":"call"}`)
	if got := string(e.Decide("summary", "").Result); got != `{"fact_count":3,"last_fact_at":1764000000000,"counts":{"call":1,"note":2}}` {
		t.Fatalf("summary = %s", got)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	e := sdktest.NewEntity(Ledger, "user", "u1")
	if r := e.Do("append", `{"type":"login","data":[1]}`); r.Status != abi.StatusBadInput || r.Err.Field != "data" {
		t.Fatalf("array data: %s", r)
	}
	a := sdktest.NewEntity(Ledger, "asset", "a1")
	if r := a.Do("append", `{"type":"outcome"}`); r.Status != abi.StatusBadInput || r.Err.Code != "wrong_entity_type" {
		t.Fatalf("an asset: %s", r)
	}
	if len(e.Facts)+len(a.Facts) != 0 {
		t.Fatal("refused appends recorded facts")
	}
}

// TestRecordsFactTypesItWasNotBuiltWith: a fact type a domain manifest
// layer adds to a type (the host has checked it is declared) is recorded
// and counted like the others.
func TestRecordsFactTypesItWasNotBuiltWith(t *testing.T) {
	t.Parallel()
	e := sdktest.NewEntity(Ledger, "contact", "c1")
	if r := e.Do("append", `{"type":"claim_filed","data":{"claim":"cl-1"}}`); !r.OK() || len(e.Facts) != 1 || e.Facts[0].Type != "claim_filed" {
		t.Fatalf("claim_filed on a contact: %s", r)
	}
	if got := string(e.Decide("summary", "").Result); got != `{"fact_count":1,"last_fact_at":1764000000000,"counts":{"claim_filed":1}}` {
		t.Fatalf("summary = %s", got)
	}
}
