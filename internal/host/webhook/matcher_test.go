package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
)

func TestTriggeredFactIDIsDeterministic(t *testing.T) {
	t.Parallel()
	src := "fct_01JD3X8Y9Z0000000000000000"
	a := triggeredFactID(src, "cfg_1", 1, 0)
	if a != triggeredFactID(src, "cfg_1", 1, 0) {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{triggeredFactID(src, "cfg_1", 2, 0), triggeredFactID(src, "cfg_2", 1, 0),
		triggeredFactID("fct_01JD3X8Y9Z0000000000000001", "cfg_1", 1, 0)} {
		if other == a {
			t.Errorf("%s collides", other)
		}
	}
	u, err := ulid.ParseStrict(strings.TrimPrefix(a, "fct_"))
	if err != nil {
		t.Fatalf("%s is not fct_<ULID>: %v", a, err)
	}
	src0, _ := ulid.ParseStrict(strings.TrimPrefix(src, "fct_"))
	if u.Time() != src0.Time() {
		t.Errorf("ULID time %d, want the triggering fact's %d", u.Time(), src0.Time())
	}
	// A source id that is no ULID takes the fallback time.
	u2, _ := ulid.ParseStrict(strings.TrimPrefix(triggeredFactID("client-id", "cfg_1", 1, 1_700_000_000_000), "fct_"))
	if u2.Time() != 1_700_000_000_000 {
		t.Errorf("fallback time %d", u2.Time())
	}
}

// Matching: exact <type>.<subtype>, scopes, effective_at, archived configs,
// webhook facts never trigger, and facts matched again (the stream's
// at-least-once delivery) create nothing twice.
func TestMatching(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, nil)
		ctx := t.Context()
		acct := e.createConfig(platform.ConfigInput{Name: "all won", Settings: e.settings(nil)})
		camp := e.createConfig(platform.ConfigInput{ScopeType: ScopeCampaign, ScopeID: "camp-1", Settings: e.settings(nil)})
		otherCamp := e.createConfig(platform.ConfigInput{ScopeType: ScopeCampaign, ScopeID: "camp-2", Settings: e.settings(nil)})
		asset := e.createConfig(platform.ConfigInput{ScopeType: ScopeAsset, ScopeID: "asset-1",
			Settings: e.settings(map[string]any{"triggers": []any{"outcome.call_done"}})})
		later := e.createConfig(platform.ConfigInput{Settings: e.settings(nil), EffectiveAt: clockStart.Add(time.Hour).UnixMilli()})
		archived := e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
		if _, err := e.plat.ArchiveConfig(ctx, tenantA, archived.ID); err != nil {
			t.Fatal(err)
		}
		wildcard := e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"triggers": []any{"webhook.sent", "outcome.deal_lost"}})})

		e.deal("deal-1")
		won := e.emit("deal-1", "deal_won", map[string]any{"campaign_id": "camp-1"})
		e.emit("deal-1", "note", nil) // no config triggers on outcome.note
		if _, err := e.plat.CreateEntity(ctx, tenantA, platform.CreateEntityInput{Type: "asset", ID: "asset-1",
			Fields: map[string]any{"status": "active", "name": "line", "identifier": "+1", "subtype": "phone"}}); err != nil {
			t.Fatal(err)
		}
		call, err := e.plat.AppendFact(ctx, tenantA, platform.AppendFactInput{EntityID: "asset-1", Type: "outcome", Subtype: "call_done"})
		if err != nil {
			t.Fatal(err)
		}
		// Another tenant's identical fact matches none of tenant-a's configs.
		if _, err := e.plat.CreateEntity(ctx, "tenant-b", platform.CreateEntityInput{Type: "deal", ID: "deal-1",
			Fields: map[string]any{"status": "open", "name": "b", "stage": "new"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.plat.AppendFact(ctx, "tenant-b", platform.AppendFactInput{EntityID: "deal-1", Type: "outcome", Subtype: "deal_won"}); err != nil {
			t.Fatal(err)
		}

		facts, err := e.st.ReadFacts(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second pass is the stream replaying the batch
			if err := e.svc.matcher.handle(ctx, facts); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]string{}
		for _, r := range e.deliveries() {
			var tf store.Fact
			f, err := e.st.GetFact(ctx, tenantA, r.TriggeredFactID)
			if err != nil {
				t.Fatal(err)
			}
			tf = *f
			got[r.ConfigID] = tf.SourceID
		}
		want := map[string]string{acct.ID: won.ID, camp.ID: won.ID, asset.ID: call.ID}
		if len(got) != len(want) {
			t.Errorf("deliveries for configs %v, want %v", got, want)
		}
		for cfg, src := range want {
			if got[cfg] != src {
				t.Errorf("config %s: delivery for %q, want %q", cfg, got[cfg], src)
			}
		}
		for _, none := range []string{otherCamp.ID, later.ID, archived.ID, wildcard.ID} {
			if _, ok := got[none]; ok {
				t.Errorf("config %s fired", none)
			}
		}
		// Now the webhook facts exist: matching them fires nothing either.
		facts, _ = e.st.ReadFacts(ctx, 0, 0)
		if err := e.svc.matcher.handle(ctx, facts); err != nil {
			t.Fatal(err)
		}
		if n := len(e.deliveries()); n != 3 {
			t.Errorf("%d deliveries after matching webhook facts, want 3", n)
		}
	})
}

func TestPayloadShaping(t *testing.T) {
	t.Parallel()
	f := &store.Fact{ID: "fct_1", TenantID: "t", EntityID: "deal-1", EntityType: "deal", Type: "outcome", Subtype: "deal_won",
		SourceID: "src", TraceID: "tr", Timestamp: 1000, CreatedAt: 2000, Position: 7, Seq: 3,
		Data: json.RawMessage(`{"amount": 0.10, "currency": "USD", "note": "<b>"}`)}
	created := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	head := `{"delivery_id":"del_1","timestamp":"2026-01-02T03:04:05.006Z","trigger":"outcome.deal_won","config_version":3,"fact":`
	cases := []struct {
		name string
		p    PayloadSettings
		want string
	}{
		{"default", PayloadSettings{}, head + `{"id":"fct_1","type":"outcome","subtype":"deal_won","timestamp":1000,"data":{"amount":0.10,"currency":"USD","note":"<b>"}}}`},
		{"include", PayloadSettings{IncludeFields: []string{"fact_id", "entity_id", "data.amount"}},
			head + `{"id":"fct_1","entity_id":"deal-1","data":{"amount":0.10}}}`},
		{"mapping", PayloadSettings{FieldMapping: map[string]string{"fact_id": "event_id", "data.amount": "amount"}},
			head + `{"event_id":"fct_1","type":"outcome","subtype":"deal_won","timestamp":1000,"data":{"currency":"USD","note":"<b>"},"amount":0.10}}`},
		{"include and mapping", PayloadSettings{IncludeFields: []string{"fact_type", "data.currency"}, FieldMapping: map[string]string{"data.currency": "ccy", "fact_type": "kind"}},
			head + `{"kind":"outcome","ccy":"USD"}}`},
		{"full fact", PayloadSettings{IncludeFields: []string{"fact_id"}, IncludeFullFact: true},
			head + `{"id":"fct_1"},"full_fact":{"id":"fct_1","type":"outcome","subtype":"deal_won","tenant_id":"t","entity_id":"deal-1",` +
				`"entity_type":"deal","seq":3,"position":7,"source_id":"src","trace_id":"tr","timestamp":1000,"data":{"amount":0.10,"currency":"USD","note":"<b>"},"created_at":2000}}`},
	}
	for _, c := range cases {
		b, err := BuildPayload(c.p, f, "del_1", "outcome.deal_won", 3, created)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, b, c.want)
		}
		if !json.Valid(b) {
			t.Errorf("%s: invalid JSON", c.name)
		}
	}
}

// appendCounter is a real store that records the size of each
// AppendFacts call (each one transaction).
type appendCounter struct {
	store.Store
	mu    sync.Mutex
	sizes []int
}

func (c *appendCounter) AppendFacts(ctx context.Context, items []store.Append) ([]store.AppendResult, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(items))
	c.mu.Unlock()
	return c.Store.AppendFacts(ctx, items)
}

func (c *appendCounter) take() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sizes
	c.sizes = nil
	return s
}

// Fan-out: the matches of one stream batch (3 configs x 100 facts, more
// than the 256 a transaction once held) are recorded in one transaction;
// more matches than the delivery committer records in one (commitBatch)
// take more, none larger, so matching and recording outcomes share the
// fact head lock in equal turns.
func TestMatchesOfOneBatchShareOneTransaction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := &appendCounter{Store: teststore.Open(t, backend)}
		e := newEnvOn(t, backend, st, nil)
		ctx := t.Context()
		for range 3 {
			e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
		}
		e.deal("deal-1")
		after := int64(0)
		for _, c := range []struct {
			facts int
			want  []int
		}{
			{100, []int{300}},
			{200, []int{commitBatch, 600 - commitBatch}},
		} {
			for range c.facts {
				e.emit("deal-1", "deal_won", nil)
			}
			batch, err := e.st.ReadFacts(ctx, after, matchBatch)
			if err != nil {
				t.Fatal(err)
			}
			after = batch[len(batch)-1].Position
			st.take()
			if err := e.svc.matcher.handle(ctx, batch); err != nil {
				t.Fatal(err)
			}
			if got := st.take(); !slices.Equal(got, c.want) {
				t.Errorf("%d facts: transactions of %v matches, want %v", c.facts, got, c.want)
			}
		}
		if n := len(e.deliveries()); n != 900 {
			t.Errorf("%d deliveries, want 900", n)
		}
	})
}

// One fact matched by configs of different payload settings: each
// delivery's body has its own config's shape (the fact's object is
// rendered once per shape and shared by configs of the same one).
func TestMatchedConfigsKeepTheirPayloadShapes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, nil)
		ctx := t.Context()
		shapes := map[string]map[string]any{
			"default": nil,
			"ids":     {"include_fields": []any{"fact_id"}},
			"renamed": {"include_fields": []any{"fact_id", "data.amount"}, "field_mapping": map[string]any{"data.amount": "amount"}},
		}
		want := map[string]string{}
		for name, payload := range shapes {
			extra := map[string]any{}
			if payload != nil {
				extra["payload"] = payload
			}
			for range 2 { // two configs of each shape
				c := e.createConfig(platform.ConfigInput{Settings: e.settings(extra)})
				want[c.ID] = name
			}
		}
		e.deal("deal-1")
		f := e.emit("deal-1", "deal_won", map[string]any{"amount": 5})
		batch, err := e.st.ReadFacts(ctx, 0, matchBatch)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.matcher.handle(ctx, batch); err != nil {
			t.Fatal(err)
		}
		objects := map[string]string{
			"default": `{"id":"` + f.ID + `","type":"outcome","subtype":"deal_won","timestamp":` + strconv.FormatInt(f.Timestamp, 10) + `,"data":{"amount":5}}`,
			"ids":     `{"id":"` + f.ID + `"}`,
			"renamed": `{"id":"` + f.ID + `","amount":5}`,
		}
		rows := e.deliveries()
		if len(rows) != len(want) {
			t.Fatalf("%d deliveries, want %d", len(rows), len(want))
		}
		for _, r := range rows {
			var b struct {
				Fact json.RawMessage `json:"fact"`
			}
			if err := json.Unmarshal(r.Payload, &b); err != nil {
				t.Fatal(err)
			}
			if got, shape := string(b.Fact), want[r.ConfigID]; got != objects[shape] {
				t.Errorf("config %s (%s): fact %s, want %s", r.ConfigID, shape, got, objects[shape])
			}
		}
	})
}
