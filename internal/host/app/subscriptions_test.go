package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

// TestSubscriptionAddedAtRuntime: a subscription a domain layer adds
// through the admin API runs at once, without a restart; removing the
// layer stops it; a subscription whose handler no installed plugin serves
// is refused (it was accepted, and its consumer retried for ever).
func TestSubscriptionAddedAtRuntime(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "asset", "id": "line-1", "name": "Line", "status": "on", "identifier": "+1555", "subtype": "phone"}); code != 201 {
		t.Fatalf("create asset: %d %v", code, body)
	}
	noAnswer := func(attempt int) {
		t.Helper()
		if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "line-1", "type": "outcome", "subtype": "no_answer", "data": map[string]any{"attempt": attempt}}); code != 201 {
			t.Fatalf("outcome: %d %v", code, body)
		}
	}
	followups := func() int { return followupsOf(l, "line-1") }
	caughtUp := func(consumer string) {
		t.Helper()
		testutil.EventuallyNil(t, 30*time.Second, func() error {
			pos, _ := l.a.Store.GetCheckpoint(context.Background(), consumer)
			head, _ := l.a.Store.HeadPosition(context.Background())
			if pos != head {
				return fmt.Errorf("%s at %d of %d", consumer, pos, head)
			}
			return nil
		})
	}
	noAnswer(1)
	caughtUp("subscription:no_answer_followup")
	if got := followups(); got != 1 {
		t.Fatalf("follow-ups from the served subscription: %d, want 1", got)
	}

	code, body := l.putDomain("echo", "name: echo\nversion: \"1\"\nsubscriptions:\n  - {name: echo, patterns: [outcome.no_answer], handler: no_answer_followupp}\n")
	if code != 422 || !strings.Contains(fmt.Sprint(body["errors"]), `subscriptions.echo.handler: no installed subscription plugin serves handler "no_answer_followupp"`) {
		t.Fatalf("a handler no plugin serves: %d %v", code, body)
	}
	if code, body := l.putDomain("echo", "name: echo\nversion: \"1\"\nentities: {}\nsubscriptions:\n  - {name: echo, patterns: [outcome.no_answer], handler: no_answer_followup}\n"); code != 201 {
		t.Fatalf("a layer adding a subscription: %d %v", code, body)
	}
	if got := l.a.Subscriptions.Running(); !slices.Equal(got, []string{"echo", "no_answer_followup"}) {
		t.Fatalf("running subscriptions: %v", got)
	}
	// The new subscription reads from the start of the stream: the
	// earlier outcome gets its follow-up from it too.
	caughtUp("subscription:echo")
	if got := followups(); got != 2 {
		t.Fatalf("follow-ups once the added subscription caught up: %d, want 2", got)
	}
	noAnswer(2)
	caughtUp("subscription:echo")
	caughtUp("subscription:no_answer_followup")
	if got := followups(); got != 4 {
		t.Fatalf("follow-ups of a second outcome with two subscriptions: %d, want 4", got)
	}

	// Changed patterns apply from the subscription's position on.
	if code, body := l.putDomain("echo", "name: echo\nversion: \"2\"\nsubscriptions:\n  - {name: echo, patterns: [outcome.busy], handler: no_answer_followup}\n"); code != 200 {
		t.Fatalf("a layer changing the subscription: %d %v", code, body)
	}
	noAnswer(3)
	caughtUp("subscription:echo")
	caughtUp("subscription:no_answer_followup")
	if got := followups(); got != 5 {
		t.Fatalf("follow-ups once the subscription no longer matches no_answer: %d, want 5", got)
	}

	if code, body := l.call("DELETE", "/v1/admin/domain/echo", l.op, nil); code != 200 {
		t.Fatalf("remove the layer: %d %v", code, body)
	}
	if got := l.a.Subscriptions.Running(); !slices.Equal(got, []string{"no_answer_followup"}) {
		t.Fatalf("running subscriptions after the removal: %v", got)
	}
	noAnswer(4)
	caughtUp("subscription:no_answer_followup")
	if got := followups(); got != 6 {
		t.Fatalf("follow-ups after the layer went: %d, want 6", got)
	}
	// The removed subscription's checkpoint stays, shown as no longer
	// declared, and its lag is no longer sampled.
	code, body = l.call("GET", "/v1/admin/stream", l.op, nil)
	if code != 200 {
		t.Fatalf("stream status: %d %v", code, body)
	}
	declared := map[string]any{}
	for _, c := range body["data"].(map[string]any)["consumers"].([]any) {
		c := c.(map[string]any)
		declared[c["name"].(string)] = c["declared"]
	}
	if declared["subscription:echo"] != false || declared["subscription:no_answer_followup"] != true || declared["webhooks"] != true {
		t.Errorf("consumers declared: %v", declared)
	}
	if err := l.a.LagHistory.Sample(context.Background(), l.a.Store, time.Now()); err != nil {
		t.Fatal(err)
	}
	samples := l.a.LagHistory.Samples()
	lag := samples[len(samples)-1].Lag
	if _, ok := lag["subscription:no_answer_followup"]; !ok {
		t.Errorf("last lag sample %v, want the declared consumers", lag)
	}
	if _, ok := lag["subscription:echo"]; ok {
		t.Errorf("last lag sample %v has the removed subscription", lag)
	}
}

// TestActionsBeyondTheBoundAreCounted: one fact causes at most 64
// actions; a handler returning more has the rest skipped, and they are
// counted (factline_subscription_actions_skipped_total, reason
// too_many_actions) as well as logged, where they had only been logged.
func TestActionsBeyondTheBoundAreCounted(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	if code, body := l.call("PUT", "/v1/admin/plugins/fanout", l.op, moduleFrom(t, "testdata/fanout")); code != 201 {
		t.Fatalf("install fanout: %d %v", code, body)
	}
	if code, body := l.putDomain("fan", "name: fan\nversion: \"1\"\nsubscriptions:\n  - {name: fan, patterns: [outcome.no_answer], handler: fanout}\n"); code != 201 {
		t.Fatalf("domain: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "asset", "id": "line-1", "name": "Line", "status": "on", "identifier": "+1555", "subtype": "phone"}); code != 201 {
		t.Fatalf("create asset: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "line-1", "type": "outcome", "subtype": "no_answer"}); code != 201 {
		t.Fatalf("outcome: %d %v", code, body)
	}
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		pos, _ := l.a.Store.GetCheckpoint(context.Background(), "subscription:fan")
		head, _ := l.a.Store.HeadPosition(context.Background())
		if pos != head {
			return fmt.Errorf("subscription:fan at %d of %d", pos, head)
		}
		return nil
	})
	code, body := l.call("GET", "/v1/facts?entity_id=line-1&type=outcome&subtype=fanned&limit=100", l.key, nil)
	if items, _ := dataOf(body)["items"].([]any); code != 200 || len(items) != 64 {
		t.Fatalf("fanned outcomes: %d, %d items, want 64", code, len(items))
	}
	families, err := l.a.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	skipped := -1.0
	for _, f := range families {
		if f.GetName() != "factline_subscription_actions_skipped_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["subscription"] == "fan" && labels["reason"] == "too_many_actions" {
				skipped = m.GetCounter().GetValue()
			}
		}
	}
	if skipped != 6 {
		t.Fatalf("skipped actions counted: %v, want 6", skipped)
	}
}

// TestHandlerServedByAnotherPluginIsRefused: a subscription plugin whose
// handler has the name of one another plugin serves is refused, so it
// cannot take that handler's facts from it; the first keeps serving.
func TestHandlerServedByAnotherPluginIsRefused(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	code, body := l.call("PUT", "/v1/admin/plugins/clash", l.op, moduleFrom(t, "testdata/clash"))
	if code != 422 || !strings.Contains(fmt.Sprint(body), `handler "no_answer_followup" is served by plugin "followup" already`) {
		t.Fatalf("install clash: %d %v, want 422 naming the handler and its plugin", code, body)
	}
	if p, ok := l.a.Plugins.SubscriptionHandler("no_answer_followup"); !ok || p.Description().Name != "followup" {
		t.Fatalf("no_answer_followup served by %v (%v), want followup", p, ok)
	}
}
