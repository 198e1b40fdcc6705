package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var webhookTests = []test{
	{"AppendWithOutbox", testAppendWithOutbox},
	{"OutboxRoundTrip", testOutboxRoundTrip},
	{"ClaimDueAndLease", testClaimDueAndLease},
	{"ClaimPerEndpointAndSkip", testClaimPerEndpoint},
	{"ClaimSkipsPaused", testClaimSkipsPaused},
	{"PauseWithoutOutboxChange", testPauseWithoutOutboxChange},
	{"ConcurrentClaims", testConcurrentClaims},
	{"ChangePreconditions", testChangePreconditions},
	{"ChangeFactsAndPause", testChangeFactsAndPause},
	{"ListAndCount", testOutboxListCount},
	{"ListByCreatedAt", testOutboxListByCreatedAt},
	{"Secrets", testWebhookSecrets},
	{"SecretsOfAnotherKeyAreRefused", testSecretsOfAnotherKeyAreRefused},
}

// newOutboxRow returns a pending row for the triggered fact factID.
func newOutboxRow(tenant, factID, endpoint string, due int64) *store.OutboxRow {
	return &store.OutboxRow{
		DeliveryID:      "del_" + factID + "_cfg1_1700000000",
		TenantID:        tenant,
		TriggeredFactID: factID,
		ConfigID:        "cfg1",
		ConfigVersion:   2,
		CampaignID:      "camp1",
		Endpoint:        endpoint,
		Status:          store.OutboxPending,
		Attempt:         1,
		MaxAttempts:     5,
		TimeoutSeconds:  30,
		SigTimestamp:    1_700_000_000,
		// Spacing and key order that jsonb would not keep: the payload is
		// stored byte for byte.
		Payload:       []byte(`{"z": 1,  "a":[1.50, "x"]}`),
		Message:       raw(`{"url":"https://example.com/hook"}`),
		NextAttemptAt: due,
		CreatedAt:     t0,
		UpdatedAt:     t0,
	}
}

// triggered returns an entity-less webhook.triggered fact with an outbox
// row.
func triggered(tenant, factID, endpoint string, due int64) store.Append {
	f := newFact(tenant, "", factID)
	f.Type, f.Subtype = "webhook", "triggered"
	return store.Append{Fact: f, Outbox: newOutboxRow(tenant, factID, endpoint, due)}
}

func addOutbox(t *testing.T, s store.Store, tenant string, n int, endpoint string, due int64) []string {
	t.Helper()
	var items []store.Append
	var ids []string
	for i := range n {
		it := triggered(tenant, fmt.Sprintf("fct_%s_%s_%04d", tenant, endpointTag(endpoint), i), endpoint, due)
		items = append(items, it)
		ids = append(ids, it.Outbox.DeliveryID)
	}
	appendOK(t, s, items...)
	return ids
}

func endpointTag(e string) string {
	var b []byte
	for _, c := range []byte(e) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b = append(b, c)
		}
	}
	return string(b)
}

func claim(t *testing.T, s store.Store, req store.ClaimRequest) []store.OutboxClaim {
	t.Helper()
	if req.Token == "" {
		req.Token = "tok"
	}
	got, err := s.ClaimOutbox(t.Context(), req)
	noErr(t, err, "ClaimOutbox")
	return got
}

func claimedIDs(cs []store.OutboxClaim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.DeliveryID
	}
	return out
}

func testAppendWithOutbox(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_1", "account"))

	ok := triggered("tnt_a", "fct_1", "https://a.example:443", t0)
	dup := triggered("tnt_a", "fct_1", "https://a.example:443", t0) // same fact id: the item fails
	dup.Outbox.DeliveryID, dup.Outbox.TriggeredFactID = "del_other", "fct_other"
	missing := triggered("tnt_a", "fct_2", "https://a.example:443", t0) // entity missing: the item fails
	missing.Fact.EntityID = "ent_missing"
	withEntity := triggered("tnt_a", "fct_3", "https://a.example:443", t0)
	withEntity.Fact.EntityID = "ent_1"

	res, err := s.AppendFacts(ctx, []store.Append{ok, dup, missing, withEntity})
	noErr(t, err, "AppendFacts")
	wantErr(t, res[1].Err, store.ErrAlreadyExists, "duplicate fact id")
	wantErr(t, res[2].Err, store.ErrNotFound, "missing entity")
	if res[0].Err != nil || res[3].Err != nil {
		t.Fatalf("items 0 and 3: %v, %v", res[0].Err, res[3].Err)
	}
	if res[0].Fact.Position != 1 || res[3].Fact.Position != 2 {
		t.Errorf("positions %d, %d; want 1, 2", res[0].Fact.Position, res[3].Fact.Position)
	}
	got, err := s.GetOutbox(ctx, "tnt_a", ok.Outbox.DeliveryID)
	noErr(t, err, "GetOutbox")
	checkOutbox(t, got, *ok.Outbox)
	for _, id := range []string{dup.Outbox.DeliveryID, missing.Outbox.DeliveryID} {
		_, err := s.GetOutbox(ctx, "tnt_a", id)
		wantErr(t, err, store.ErrNotFound, "outbox row of a failed item "+id)
	}
	_, err = s.GetOutbox(ctx, "tnt_a", withEntity.Outbox.DeliveryID)
	noErr(t, err, "outbox row of an entity fact")

	// Another tenant sees nothing.
	_, err = s.GetOutbox(ctx, "tnt_b", ok.Outbox.DeliveryID)
	wantErr(t, err, store.ErrNotFound, "GetOutbox of another tenant")

	// A taken delivery id under a new fact fails the whole call.
	again := triggered("tnt_a", "fct_9", "https://a.example:443", t0)
	again.Outbox.DeliveryID = ok.Outbox.DeliveryID
	if _, err := s.AppendFacts(ctx, []store.Append{again}); err == nil {
		t.Error("AppendFacts with a taken delivery id: got nil error")
	}
	if _, err := s.GetFact(ctx, "tnt_a", "fct_9"); err == nil {
		t.Error("the fact of a failed call was written")
	}
}

// checkOutbox compares every field, JSON by value.
func checkOutbox(t *testing.T, got *store.OutboxRow, want store.OutboxRow) {
	t.Helper()
	if got == nil {
		t.Fatalf("outbox %s: got nil", want.DeliveryID)
	}
	g, w := *got, want
	checkJSON(t, "outbox message", g.Message, w.Message)
	checkJSON(t, "outbox dead letter", g.DeadLetter, w.DeadLetter)
	if !bytes.Equal(g.Payload, w.Payload) {
		t.Errorf("payload %q, want %q byte for byte", g.Payload, w.Payload)
	}
	g.Message, w.Message, g.DeadLetter, w.DeadLetter, g.Payload, w.Payload = nil, nil, nil, nil, nil, nil
	if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
		t.Errorf("outbox %s:\n got %+v\nwant %+v", w.DeliveryID, g, w)
	}
}

func testOutboxRoundTrip(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	it := triggered("tnt_a", "fct_1", "https://a.example:443", t0)
	appendOK(t, s, it)
	c := claim(t, s, store.ClaimRequest{Now: t0, Token: "w1", Limit: 10, LeaseFactorMS: 2000, LeaseMarginMS: 500})
	if len(c) != 1 {
		t.Fatalf("claimed %d rows, want 1", len(c))
	}
	// Every mutable column is written and read back.
	want := c[0].OutboxRow
	want.Status = store.OutboxDead
	want.Attempt = 5
	want.SigTimestamp = 1_700_000_100
	want.NextAttemptAt = t0 + 7
	want.ClaimedUntil = 0
	want.ClaimToken = ""
	want.AttemptStartedAt = 0
	want.FirstAttemptAt = t0 + 1
	want.LastAttemptAt = t0 + 2
	want.LastStatusCode = 503
	want.DeadLetter = raw(`{"delivery_id":"x","attempts":5}`)
	want.DLQMessageID = "dlq_1"
	want.DeadAt = t0 + 3
	want.Replays = 2
	want.UpdatedAt = t0 + 4
	errs, err := s.ChangeOutbox(ctx, []store.OutboxChange{{Row: want, ClaimToken: "w1"}})
	noErr(t, err, "ChangeOutbox")
	noErr(t, errs[0], "change")
	got, err := s.GetOutbox(ctx, "tnt_a", want.DeliveryID)
	noErr(t, err, "GetOutbox")
	checkOutbox(t, got, want)
}

func testClaimDueAndLease(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	due := addOutbox(t, s, "tnt_a", 3, "https://a.example:443", t0)
	later := addOutbox(t, s, "tnt_b", 1, "https://b.example:443", t0+20_000)

	req := store.ClaimRequest{Now: t0, Token: "w1", Limit: 10, LeaseFactorMS: 1000, LeaseMarginMS: 500}
	c := claim(t, s, req)
	if !equalStrings(claimedIDs(c), due) {
		t.Fatalf("claimed %v, want the due rows %v", claimedIDs(c), due)
	}
	for _, r := range c {
		if r.ClaimToken != "w1" || r.ClaimedUntil != t0+30*1000+500 || r.AttemptStartedAt != t0 || r.Interrupted != 0 {
			t.Errorf("claimed row %s: token %q until %d started %d interrupted %d", r.DeliveryID, r.ClaimToken,
				r.ClaimedUntil, r.AttemptStartedAt, r.Interrupted)
		}
	}
	// Leased rows are not handed out again while the lease lasts.
	if c2 := claim(t, s, store.ClaimRequest{Now: t0 + 1000, Token: "w2", Limit: 10}); len(c2) != 0 {
		t.Fatalf("second claim during the lease got %v", claimedIDs(c2))
	}
	// Limit applies, oldest due first.
	if c3 := claim(t, s, store.ClaimRequest{Now: t0 + 20_000, Token: "w3", Limit: 1, LeaseFactorMS: 1000}); !equalStrings(claimedIDs(c3), later) {
		t.Fatalf("claim at t0+20s: %v, want %v", claimedIDs(c3), later)
	}
	// After the lease a row comes back, reporting the attempt that was cut
	// short.
	after := t0 + 30*1000 + 500
	c4 := claim(t, s, store.ClaimRequest{Now: after, Token: "w4", Limit: 10, LeaseFactorMS: 1000})
	if !equalStrings(claimedIDs(c4), due) {
		t.Fatalf("reclaim after the lease: %v, want %v", claimedIDs(c4), due)
	}
	for _, r := range c4 {
		if r.Interrupted != t0 || r.AttemptStartedAt != after || r.ClaimToken != "w4" {
			t.Errorf("reclaimed %s: interrupted %d started %d token %q", r.DeliveryID, r.Interrupted, r.AttemptStartedAt, r.ClaimToken)
		}
	}
	// The first worker's lease is gone: its change fails.
	row := c[0].OutboxRow
	row.Status = store.OutboxSent
	errs, err := s.ChangeOutbox(ctx, []store.OutboxChange{{Row: row, ClaimToken: "w1"}})
	noErr(t, err, "ChangeOutbox")
	wantErr(t, errs[0], store.ErrVersionConflict, "change with a lost lease")

	// Sent and dead rows are never claimed.
	for i, st := range []string{store.OutboxSent, store.OutboxDead} {
		row := c4[i].OutboxRow
		row.Status, row.ClaimToken, row.ClaimedUntil, row.AttemptStartedAt = st, "", 0, 0
		errs, err := s.ChangeOutbox(ctx, []store.OutboxChange{{Row: row, ClaimToken: "w4"}})
		noErr(t, err, "ChangeOutbox")
		noErr(t, errs[0], "change to "+st)
	}
	c5 := claim(t, s, store.ClaimRequest{Now: t0 + 10*60_000, Token: "w5", Limit: 10})
	if want := append(due[2:], later...); !equalStrings(claimedIDs(c5), want) {
		t.Fatalf("claim after sent/dead: %v, want %v", claimedIDs(c5), want)
	}
}

func testClaimPerEndpoint(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	a := addOutbox(t, s, "tnt_a", 5, "https://a.example:443", t0)
	b := addOutbox(t, s, "tnt_a", 2, "https://b.example:443", t0+1)
	c := claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w1", Limit: 10, PerEndpoint: 2, LeaseFactorMS: 1000})
	want := []string{a[0], a[1], b[0], b[1]}
	if !equalStrings(claimedIDs(c), want) {
		t.Fatalf("per-endpoint claim: %v, want %v", claimedIDs(c), want)
	}
	if c := claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w4", Limit: 10, DueFrom: t0 + 2}); len(c) != 0 {
		t.Fatalf("DueFrom after every due row: got %v", claimedIDs(c))
	}
	c = claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w2", Limit: 10, SkipEndpoints: []string{"https://a.example:443"}})
	if len(c) != 0 {
		t.Fatalf("skip endpoint a: got %v", claimedIDs(c))
	}
	c = claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w3", Limit: 10, SkipEndpoints: []string{"https://b.example:443"}})
	if !equalStrings(claimedIDs(c), a[2:]) {
		t.Fatalf("skip endpoint b: %v, want %v", claimedIDs(c), a[2:])
	}
}

func testClaimSkipsPaused(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	ids := addOutbox(t, s, "tnt_a", 2, "https://a.example:443", t0)
	c := claim(t, s, store.ClaimRequest{Now: t0, Token: "w1", Limit: 1})
	row := c[0].OutboxRow
	row.Status, row.ClaimToken, row.ClaimedUntil, row.AttemptStartedAt = store.OutboxDead, "", 0, 0
	pause := &store.WebhookPause{TenantID: "tnt_a", ConfigID: "cfg1", DeliveryID: row.DeliveryID, Reason: "410 Gone", PausedAt: t0 + 5}
	errs, err := s.ChangeOutbox(ctx, []store.OutboxChange{{Row: row, ClaimToken: "w1", Pause: pause}})
	noErr(t, err, "ChangeOutbox")
	noErr(t, errs[0], "change with pause")
	got, err := s.GetWebhookPause(ctx, "tnt_a", "cfg1")
	noErr(t, err, "GetWebhookPause")
	if *got != *pause {
		t.Errorf("pause %+v, want %+v", got, pause)
	}
	_, err = s.GetWebhookPause(ctx, "tnt_b", "cfg1")
	wantErr(t, err, store.ErrNotFound, "pause of another tenant")
	if c := claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w2", Limit: 10}); len(c) != 0 {
		t.Fatalf("claimed %v of a paused config", claimedIDs(c))
	}
	wantErr(t, s.ResumeWebhookConfig(ctx, "tnt_b", "cfg1"), store.ErrNotFound, "resume in another tenant")
	noErr(t, s.ResumeWebhookConfig(ctx, "tnt_a", "cfg1"), "ResumeWebhookConfig")
	wantErr(t, s.ResumeWebhookConfig(ctx, "tnt_a", "cfg1"), store.ErrNotFound, "resume twice")
	if c := claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w3", Limit: 10}); !equalStrings(claimedIDs(c), ids[1:]) {
		t.Fatalf("after resume: %v, want %v", claimedIDs(c), ids[1:])
	}
}

// An admin's pause: no outbox change, no delivery behind it; a second
// pause is refused and keeps the first; pauses list by tenant.
func testPauseWithoutOutboxChange(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	ids := addOutbox(t, s, "tnt_a", 2, "https://a.example:443", t0)
	pause := &store.WebhookPause{TenantID: "tnt_a", ConfigID: "cfg1", Reason: "paused by an admin", PausedAt: t0 + 1}
	noErr(t, s.PauseWebhookConfig(ctx, pause), "PauseWebhookConfig")
	wantErr(t, s.PauseWebhookConfig(ctx, &store.WebhookPause{TenantID: "tnt_a", ConfigID: "cfg1", Reason: "again", PausedAt: t0 + 2}),
		store.ErrAlreadyExists, "pause twice")
	got, err := s.GetWebhookPause(ctx, "tnt_a", "cfg1")
	noErr(t, err, "GetWebhookPause")
	if *got != *pause {
		t.Errorf("pause %+v, want the first %+v", got, pause)
	}
	if c := claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w1", Limit: 10}); len(c) != 0 {
		t.Fatalf("claimed %v of a paused config", claimedIDs(c))
	}
	other := &store.WebhookPause{TenantID: "tnt_a", ConfigID: "cfg0", Reason: "paused by an admin", PausedAt: t0 + 3}
	noErr(t, s.PauseWebhookConfig(ctx, other), "pause another config")
	noErr(t, s.PauseWebhookConfig(ctx, &store.WebhookPause{TenantID: "tnt_b", ConfigID: "cfg1", PausedAt: t0}), "pause in another tenant")
	list, err := s.ListWebhookPauses(ctx, "tnt_a")
	noErr(t, err, "ListWebhookPauses")
	if len(list) != 2 || list[0] != *other || list[1] != *pause {
		t.Fatalf("pauses %+v, want %+v and %+v", list, other, pause)
	}
	list, err = s.ListWebhookPauses(ctx, "tnt_c")
	noErr(t, err, "ListWebhookPauses of a tenant with none")
	if len(list) != 0 {
		t.Fatalf("pauses of tnt_c: %+v", list)
	}
	noErr(t, s.ResumeWebhookConfig(ctx, "tnt_a", "cfg1"), "ResumeWebhookConfig")
	if c := claim(t, s, store.ClaimRequest{Now: t0 + 10, Token: "w2", Limit: 10}); !equalStrings(claimedIDs(c), ids) {
		t.Fatalf("after resume: %v, want %v", claimedIDs(c), ids)
	}
}

func testConcurrentClaims(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	const n = 200
	ids := addOutbox(t, s, "tnt_a", n, "https://a.example:443", t0)
	var (
		mu   sync.Mutex
		seen = map[string]string{}
		wg   sync.WaitGroup
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := fmt.Sprintf("w%d", w)
			for {
				c, err := s.ClaimOutbox(t.Context(), store.ClaimRequest{Now: t0, Token: tok, Limit: 7, LeaseFactorMS: 1000})
				if err != nil {
					t.Error(err)
					return
				}
				if len(c) == 0 {
					return
				}
				mu.Lock()
				for _, r := range c {
					if other, dup := seen[r.DeliveryID]; dup {
						t.Errorf("%s claimed by %s and %s", r.DeliveryID, other, tok)
					}
					seen[r.DeliveryID] = tok
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != len(ids) {
		t.Fatalf("claimed %d distinct rows, want %d", len(seen), len(ids))
	}
}

func testChangePreconditions(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	ids := addOutbox(t, s, "tnt_a", 2, "https://a.example:443", t0)
	c := claim(t, s, store.ClaimRequest{Now: t0, Token: "w1", Limit: 10, LeaseFactorMS: 1000})
	sent := c[0].OutboxRow
	sent.Status, sent.ClaimToken, sent.ClaimedUntil, sent.AttemptStartedAt = store.OutboxSent, "", 0, 0
	missing := sent
	missing.DeliveryID = "del_missing"
	otherTenant := c[1].OutboxRow
	otherTenant.TenantID = "tnt_b"
	wrongStatus := c[1].OutboxRow
	errs, err := s.ChangeOutbox(ctx, []store.OutboxChange{
		{Row: sent, ClaimToken: "w1"},
		{Row: sent, ClaimToken: "w1"}, // the first change released the claim
		{Row: missing, ClaimToken: "w1"},
		{Row: otherTenant, ClaimToken: "w1"},
		{Row: wrongStatus, FromStatus: store.OutboxDead},
	})
	noErr(t, err, "ChangeOutbox")
	noErr(t, errs[0], "first change")
	wantErr(t, errs[1], store.ErrVersionConflict, "second change with the released token")
	wantErr(t, errs[2], store.ErrNotFound, "missing row")
	wantErr(t, errs[3], store.ErrNotFound, "row of another tenant")
	wantErr(t, errs[4], store.ErrVersionConflict, "wrong status")
	got, err := s.GetOutbox(ctx, "tnt_a", ids[1])
	noErr(t, err, "GetOutbox")
	if got.Status != store.OutboxPending || got.ClaimToken != "w1" {
		t.Errorf("row of failed changes changed: %+v", got)
	}
	// A status precondition alone (replay of a dead row).
	dead := c[1].OutboxRow
	dead.Status, dead.ClaimToken = store.OutboxDead, ""
	errs, err = s.ChangeOutbox(ctx, []store.OutboxChange{{Row: dead, ClaimToken: "w1"}})
	noErr(t, err, "ChangeOutbox")
	noErr(t, errs[0], "to dead")
	replay := dead
	replay.Status, replay.Attempt, replay.Replays = store.OutboxPending, 1, 1
	errs, err = s.ChangeOutbox(ctx, []store.OutboxChange{{Row: replay, FromStatus: store.OutboxDead}, {Row: replay, FromStatus: store.OutboxDead}})
	noErr(t, err, "ChangeOutbox")
	noErr(t, errs[0], "replay")
	wantErr(t, errs[1], store.ErrVersionConflict, "second replay in the same call")
}

func testChangeFactsAndPause(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	addOutbox(t, s, "tnt_a", 2, "https://a.example:443", t0) // positions 1, 2
	c := claim(t, s, store.ClaimRequest{Now: t0, Token: "w1", Limit: 10, LeaseFactorMS: 1000})
	audit := func(id string) store.Fact {
		f := newFact("tnt_a", "", id)
		f.Type, f.Subtype, f.SourceID = "webhook", "sent", "fct_x"
		return f
	}
	ok := c[0].OutboxRow
	ok.Status, ok.ClaimToken = store.OutboxSent, ""
	bad := c[1].OutboxRow
	bad.Status, bad.ClaimToken = store.OutboxDead, ""
	errs, err := s.ChangeOutbox(ctx, []store.OutboxChange{
		{Row: ok, ClaimToken: "w1", Facts: []store.Fact{audit("fct_s1"), audit("fct_s2")}},
		// A triggered fact's id is taken: nothing of this
		// change is written, not the row, not its other fact, not its pause.
		{Row: bad, ClaimToken: "w1", Facts: []store.Fact{audit("fct_s3"), audit(c[0].TriggeredFactID)},
			Pause: &store.WebhookPause{TenantID: "tnt_a", ConfigID: "cfg1", PausedAt: 1}},
	})
	noErr(t, err, "ChangeOutbox")
	noErr(t, errs[0], "change with facts")
	wantErr(t, errs[1], store.ErrAlreadyExists, "change with a taken fact id")
	facts, err := s.ReadFacts(ctx, 0, 100)
	noErr(t, err, "ReadFacts")
	if !equalInts(positions(facts), seqRange(1, 4)) || !equalStrings(factIDs(facts)[2:], []string{"fct_s1", "fct_s2"}) {
		t.Fatalf("facts after change: %v %v", positions(facts), factIDs(facts))
	}
	checkFact(t, &facts[2], store.Fact{ID: "fct_s1", TenantID: "tnt_a", Position: 3, Type: "webhook", Subtype: "sent",
		SourceID: "fct_x", Timestamp: t0, Data: raw(`{"fact":"fct_s1"}`), CreatedAt: t0 + 1})
	if head, err := s.HeadPosition(ctx); err != nil || head != 4 {
		t.Errorf("head %d, %v; want 4", head, err)
	}
	got, err := s.GetOutbox(ctx, "tnt_a", bad.DeliveryID)
	noErr(t, err, "GetOutbox")
	if got.Status != store.OutboxPending {
		t.Errorf("failed change wrote the row: %s", got.Status)
	}
	_, err = s.GetWebhookPause(ctx, "tnt_a", "cfg1")
	wantErr(t, err, store.ErrNotFound, "pause of a failed change")

	// Committed audit facts wake fact subscribers like any append.
	sub, err := s.SubscribeFacts(ctx)
	noErr(t, err, "SubscribeFacts")
	for len(sub) > 0 {
		<-sub
	}
	bad.ClaimToken = ""
	errs, err = s.ChangeOutbox(ctx, []store.OutboxChange{{Row: bad, ClaimToken: "w1", Facts: []store.Fact{audit("fct_s4")}}})
	noErr(t, err, "ChangeOutbox")
	noErr(t, errs[0], "second change")
	waitDone(t, sub, "a notification after ChangeOutbox wrote facts")
}

func testOutboxListCount(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	a := addOutbox(t, s, "tnt_a", 4, "https://a.example:443", t0)
	addOutbox(t, s, "tnt_b", 2, "https://b.example:443", t0)
	c := claim(t, s, store.ClaimRequest{Now: t0, Token: "w1", Limit: 2})
	var changes []store.OutboxChange
	for _, r := range c {
		row := r.OutboxRow
		row.Status, row.ClaimToken, row.DeadAt = store.OutboxDead, "", t0+9
		changes = append(changes, store.OutboxChange{Row: row, ClaimToken: "w1"})
	}
	_, err := s.ChangeOutbox(ctx, changes)
	noErr(t, err, "ChangeOutbox")
	d, err := s.CountOutbox(ctx)
	noErr(t, err, "CountOutbox")
	if d.Pending != 4 || d.Dead != 2 {
		t.Errorf("depths %+v, want 4 pending, 2 dead", d)
	}
	dead, err := s.ListOutbox(ctx, store.OutboxFilter{TenantID: "tnt_a", Status: store.OutboxDead, Limit: 10})
	noErr(t, err, "ListOutbox dead")
	var deadIDs []string
	for _, r := range dead {
		deadIDs = append(deadIDs, r.DeliveryID)
	}
	if !equalStrings(deadIDs, a[:2]) {
		t.Errorf("dead rows %v, want %v", deadIDs, a[:2])
	}
	page, err := s.ListOutbox(ctx, store.OutboxFilter{TenantID: "tnt_a", AfterID: a[1], Limit: 1})
	noErr(t, err, "ListOutbox page")
	if len(page) != 1 || page[0].DeliveryID != a[2] {
		t.Errorf("page after %s: %+v", a[1], page)
	}
	none, err := s.ListOutbox(ctx, store.OutboxFilter{TenantID: "tnt_a", ConfigID: "cfg_other", Limit: 10})
	noErr(t, err, "ListOutbox other config")
	if len(none) != 0 {
		t.Errorf("config filter: %d rows", len(none))
	}
}

func testWebhookSecrets(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	sec := &store.WebhookSecret{TenantID: "tnt_a", Ref: "webhook_secret_a1", Ciphertext: []byte{0, 1, 2, 255}, KeyID: "k1", CreatedAt: t0}
	noErr(t, s.CreateWebhookSecret(ctx, sec), "CreateWebhookSecret")
	wantErr(t, s.CreateWebhookSecret(ctx, sec), store.ErrAlreadyExists, "duplicate ref")
	got, err := s.GetWebhookSecret(ctx, "tnt_a", "webhook_secret_a1")
	noErr(t, err, "GetWebhookSecret")
	if !bytes.Equal(got.Ciphertext, sec.Ciphertext) || got.KeyID != "k1" || got.CreatedAt != t0 || got.ExpiresAt != nil {
		t.Errorf("secret %+v", got)
	}
	_, err = s.GetWebhookSecret(ctx, "tnt_b", "webhook_secret_a1")
	wantErr(t, err, store.ErrNotFound, "secret of another tenant")
	noErr(t, s.ExpireWebhookSecret(ctx, "tnt_a", "webhook_secret_a1", t0+100), "expire")
	noErr(t, s.ExpireWebhookSecret(ctx, "tnt_a", "webhook_secret_a1", t0+500), "expire later keeps the earlier expiry")
	got, err = s.GetWebhookSecret(ctx, "tnt_a", "webhook_secret_a1")
	noErr(t, err, "GetWebhookSecret")
	if got.ExpiresAt == nil || *got.ExpiresAt != t0+100 {
		t.Errorf("expires %v, want %d", got.ExpiresAt, t0+100)
	}
	wantErr(t, s.ExpireWebhookSecret(ctx, "tnt_b", "webhook_secret_a1", 1), store.ErrNotFound, "expire in another tenant")
}

// testSecretsOfAnotherKeyAreRefused: the first secret records its key as
// the database's; a secret encrypted with another key is refused and
// writes nothing, in any tenant.
func testSecretsOfAnotherKeyAreRefused(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	id, err := s.WebhookSecretKeyID(ctx)
	noErr(t, err, "WebhookSecretKeyID of an empty store")
	if id != "" {
		t.Fatalf("key id %q before any secret", id)
	}
	first := &store.WebhookSecret{TenantID: "tnt_a", Ref: "webhook_secret_a1", Ciphertext: []byte{1}, KeyID: "k1", CreatedAt: t0}
	noErr(t, s.CreateWebhookSecret(ctx, first), "first secret")
	id, err = s.WebhookSecretKeyID(ctx)
	noErr(t, err, "WebhookSecretKeyID")
	if id != "k1" {
		t.Fatalf("key id %q, want k1", id)
	}
	other := &store.WebhookSecret{TenantID: "tnt_b", Ref: "webhook_secret_b1", Ciphertext: []byte{2}, KeyID: "k2", CreatedAt: t0 + 1}
	wantErr(t, s.CreateWebhookSecret(ctx, other), store.ErrSecretKeyMismatch, "a secret of another key")
	_, err = s.GetWebhookSecret(ctx, "tnt_b", "webhook_secret_b1")
	wantErr(t, err, store.ErrNotFound, "the refused secret")
	second := &store.WebhookSecret{TenantID: "tnt_b", Ref: "webhook_secret_b2", Ciphertext: []byte{3}, KeyID: "k1", CreatedAt: t0 + 2}
	noErr(t, s.CreateWebhookSecret(ctx, second), "a second secret of the same key")
	if id, _ := s.WebhookSecretKeyID(ctx); id != "k1" {
		t.Fatalf("key id %q after more secrets, want k1", id)
	}
}

// A list bounded by creation time keeps From <= created_at < Before and
// combines with the other filters.
func testOutboxListByCreatedAt(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	var items []store.Append
	for i := range 4 {
		it := triggered("tnt_a", fmt.Sprintf("fct_time_%d", i), "https://a.example:443", t0)
		it.Outbox.CreatedAt = t0 + int64(i)*1000
		items = append(items, it)
	}
	appendOK(t, s, items...)
	for _, c := range []struct {
		name         string
		from, before int64
		want         []int
	}{
		{"unbounded", 0, 0, []int{0, 1, 2, 3}},
		{"from", t0 + 1000, 0, []int{1, 2, 3}},
		{"before", 0, t0 + 2000, []int{0, 1}},
		{"both", t0 + 1000, t0 + 3000, []int{1, 2}},
		{"empty", t0 + 5000, 0, nil},
	} {
		rows, err := s.ListOutbox(t.Context(), store.OutboxFilter{TenantID: "tnt_a", ConfigID: "cfg1", Status: store.OutboxPending,
			CreatedFrom: c.from, CreatedBefore: c.before, Limit: 10})
		noErr(t, err, "ListOutbox "+c.name)
		var got, want []string
		for _, r := range rows {
			got = append(got, r.DeliveryID)
		}
		for _, i := range c.want {
			want = append(want, items[i].Outbox.DeliveryID)
		}
		if !equalStrings(got, want) {
			t.Errorf("%s: rows %v, want %v", c.name, got, want)
		}
	}
}
