package main

import (
	"encoding/json"
	"testing"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
	"github.com/factline/factline/sdk/sdktest"
)

func TestNoAnswerSchedulesAFollowUp(t *testing.T) {
	t.Parallel()
	if err := sdk.Check(Subscription); err != nil {
		t.Fatal(err)
	}
	f := abi.Fact{ID: "fct_1", Type: "outcome", Subtype: "no_answer", TenantID: "t1", EntityID: "line-1", EntityType: "asset",
		Seq: 3, Position: 912, Timestamp: 1764000000000, Data: json.RawMessage(`{"contact_id":"c-9","attempt":2}`)}
	r := sdktest.Handle(Subscription, "no_answer_followup", f)
	want := `ok append line-1 outcome/followup_scheduled {"reason":"no_answer","source_fact_id":"fct_1","due_at":1764086400000,"contact_id":"c-9"}`
	if r.String() != want {
		t.Fatalf("got  %s\nwant %s", r, want)
	}
	// The same fact again gives the same action: the host deduplicates.
	if again := sdktest.Handle(Subscription, "no_answer_followup", f); again.String() != want {
		t.Fatalf("not deterministic: %s", again)
	}
	f.Data = json.RawMessage(`{"contact_id":7}`)
	if r := sdktest.Handle(Subscription, "no_answer_followup", f); !r.OK() || string(r.Actions[0].Data) != `{"reason":"no_answer","source_fact_id":"fct_1","due_at":1764086400000}` {
		t.Fatalf("unusable contact_id: %s", r)
	}
}

func TestOtherFactsGetNoAction(t *testing.T) {
	t.Parallel()
	for _, f := range []abi.Fact{
		{ID: "f", Type: "outcome", Subtype: "deal_won", EntityID: "a"},
		{ID: "f", Type: "outcome", Subtype: "followup_scheduled", EntityID: "a"},
		{ID: "f", Type: "call", Subtype: "no_answer", EntityID: "a"},
		{ID: "f", Type: "outcome", Subtype: "no_answer"},
	} {
		if r := sdktest.Handle(Subscription, "no_answer_followup", f); !r.OK() || len(r.Actions) != 0 {
			t.Errorf("%+v: %s", f, r)
		}
	}
	if r := sdktest.Handle(Subscription, "other", abi.Fact{}); r.Status != abi.StatusUnknownCommand {
		t.Errorf("unknown handler: %s", r)
	}
}
