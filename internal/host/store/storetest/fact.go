package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/store"
)

var factTests = []test{
	{"Append", testFactAppend},
	{"AppendConcurrentOneEntity", testFactAppendConcurrentOneEntity},
	{"GlobalPositions", testFactGlobalPositions},
	{"Entityless", testFactEntityless},
	{"AppendMixedBatch", testFactAppendMixedBatch},
	{"AppendState", testFactAppendState},
	{"AppendExpectedVersion", testFactAppendExpectedVersion},
	{"Get", testFactGet},
	{"ListEntityFacts", testFactListEntityFacts},
	{"ReadFacts", testFactReadFacts},
	{"DataRoundTrip", testFactDataRoundTrip},
	{"CommitOrder", testFactCommitOrder},
	{"Subscribe", testFactSubscribe},
	{"Scan", testFactScan},
	{"ListFacts", testFactList},
	{"AppendRequiresIDAndTenant", testFactAppendRequiresIDAndTenant},
	{"AppendFreshIDs", testFactAppendFreshIDs},
}

// Fresh ids (generated for the append) are not looked up: they are
// appended like any other, and one that is taken after all fails the whole
// call with ErrAlreadyExists, writing nothing, where a caller's taken id
// fails only its item.
func testFactAppendFreshIDs(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_acc", "account"))
	fact := func(id string) store.Fact {
		return store.Fact{ID: id, TenantID: "tnt_a", EntityID: "ent_acc", Type: "deposit", Timestamp: t0, CreatedAt: t0}
	}
	res := appendOK(t, s, store.Append{Fact: fact("fct_1"), FreshID: true}, store.Append{Fact: fact("fct_2"), FreshID: true})
	if res[1].Fact.Seq != 2 || res[1].Fact.Position != 2 {
		t.Errorf("second fresh fact at seq %d, position %d; want 2, 2", res[1].Fact.Seq, res[1].Fact.Position)
	}

	res, err := s.AppendFacts(ctx, []store.Append{{Fact: fact("fct_3"), FreshID: true}, {Fact: fact("fct_1")}})
	noErr(t, err, "AppendFacts of a caller's taken id")
	if res[0].Err != nil || !errors.Is(res[1].Err, store.ErrAlreadyExists) {
		t.Errorf("a caller's taken id: item errors %v, %v; want nil, ErrAlreadyExists", res[0].Err, res[1].Err)
	}

	_, err = s.AppendFacts(ctx, []store.Append{{Fact: fact("fct_4"), FreshID: true}, {Fact: fact("fct_2"), FreshID: true}})
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("a taken fresh id: error %v, want ErrAlreadyExists for the call", err)
	}
	head, err := s.HeadPosition(ctx)
	noErr(t, err, "HeadPosition")
	if head != 3 {
		t.Errorf("head position %d, want 3 (the failed call wrote nothing)", head)
	}
	if _, err := s.GetFact(ctx, "tnt_a", "fct_4"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fct_4 of the failed call: %v, want ErrNotFound", err)
	}
}

// A fact without an id or a tenant fails the whole call and writes nothing.
func testFactAppendRequiresIDAndTenant(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	for _, f := range []store.Fact{newFact("tnt_a", "", ""), newFact("", "", "fct_1")} {
		ok := newFact("tnt_a", "", "fct_ok")
		if _, err := s.AppendFacts(ctx, []store.Append{{Fact: ok}, {Fact: f}}); err == nil {
			t.Errorf("AppendFacts of %+v: no error", f)
		}
	}
	head, err := s.HeadPosition(ctx)
	noErr(t, err, "HeadPosition")
	if head != 0 {
		t.Errorf("head position %d after refused calls, want 0", head)
	}
}

func testFactAppend(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_acc", "account"))

	in := []store.Fact{
		{ID: "fct_1", TenantID: "tnt_a", EntityID: "ent_acc", Type: "deposit", Subtype: "card",
			SourceID: "src_1", TraceID: "trace_1", Timestamp: t0 + 10, Data: raw(`{"amount":100,"currency":"EUR"}`), CreatedAt: t0 + 11},
		// EntityType from the caller is ignored: the store copies it from
		// the entity row.
		{ID: "fct_2", TenantID: "tnt_a", EntityID: "ent_acc", EntityType: "wrong", Type: "charge",
			Timestamp: t0 + 20, Data: raw(`{"amount":-30}`), CreatedAt: t0 + 21},
		{ID: "fct_3", TenantID: "tnt_a", EntityID: "ent_acc", Type: "credit",
			Timestamp: t0 + 30, Data: raw(`{"amount":5,"memo":{"b":2,"a":1}}`), CreatedAt: t0 + 31},
	}
	items := make([]store.Append, len(in))
	for i, f := range in {
		items[i] = store.Append{Fact: f}
	}
	res := appendOK(t, s, items...)
	res = append(res, appendOne(t, s, store.Fact{ID: "fct_4", TenantID: "tnt_a", EntityID: "ent_acc",
		Type: "payout", Timestamp: t0 + 40, Data: raw(`{}`), CreatedAt: t0 + 41}))
	in = append(in, store.Fact{ID: "fct_4", TenantID: "tnt_a", EntityID: "ent_acc",
		Type: "payout", Timestamp: t0 + 40, Data: raw(`{}`), CreatedAt: t0 + 41})

	for i, r := range res {
		want := in[i]
		want.EntityType = "account"
		want.Seq = int64(i + 1)
		want.Position = int64(i + 1)
		checkFact(t, &r.Fact, want)
		if r.EntityVersion != int64(i+2) {
			t.Errorf("item %d: EntityVersion %d, want %d", i, r.EntityVersion, i+2)
		}
		got, err := s.GetFact(ctx, "tnt_a", want.ID)
		noErr(t, err, "GetFact "+want.ID)
		checkFact(t, got, want)
	}
	e, err := s.GetEntity(ctx, "tnt_a", "ent_acc")
	noErr(t, err, "GetEntity")
	if e.Version != 5 {
		t.Errorf("entity version after 4 facts: got %d, want 5", e.Version)
	}
	head, err := s.HeadPosition(ctx)
	noErr(t, err, "HeadPosition")
	if head != 4 {
		t.Errorf("HeadPosition: got %d, want 4", head)
	}
}

func testFactAppendConcurrentOneEntity(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_hot", "account"))

	const n = 50
	results := make([]store.AppendResult, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := s.AppendFacts(ctx, []store.Append{{Fact: newFact("tnt_a", "ent_hot", fmt.Sprintf("fct_%03d", i))}})
			if err != nil {
				t.Errorf("AppendFacts %d: %v", i, err)
				return
			}
			if len(res) != 1 || res[0].Err != nil {
				t.Errorf("AppendFacts %d: results %+v", i, res)
				return
			}
			results[i] = res[0]
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	var seqs, poss, versions []int64
	for _, r := range results {
		seqs = append(seqs, r.Fact.Seq)
		poss = append(poss, r.Fact.Position)
		versions = append(versions, r.EntityVersion)
		// Only appends touch the entity, so version = 1 + seq.
		if r.EntityVersion != r.Fact.Seq+1 {
			t.Errorf("fact %s: seq %d but entity version %d", r.Fact.ID, r.Fact.Seq, r.EntityVersion)
		}
	}
	slices.Sort(seqs)
	slices.Sort(poss)
	slices.Sort(versions)
	if !equalInts(seqs, seqRange(1, n)) {
		t.Errorf("seqs: got %v, want 1..%d", seqs, n)
	}
	if !equalInts(poss, seqRange(1, n)) {
		t.Errorf("positions: got %v, want 1..%d", poss, n)
	}
	if !equalInts(versions, seqRange(2, n+1)) {
		t.Errorf("entity versions: got %v, want 2..%d", versions, n+1)
	}

	e, err := s.GetEntity(ctx, "tnt_a", "ent_hot")
	noErr(t, err, "GetEntity")
	if e.Version != n+1 {
		t.Errorf("entity version: got %d, want %d", e.Version, n+1)
	}
	facts, err := s.ListEntityFacts(ctx, "tnt_a", "ent_hot", 0, 2*n)
	noErr(t, err, "ListEntityFacts")
	if len(facts) != n {
		t.Fatalf("ListEntityFacts: got %d facts, want %d", len(facts), n)
	}
	for i, f := range facts {
		if f.Seq != int64(i+1) {
			t.Errorf("fact %d: seq %d, want %d", i, f.Seq, i+1)
		}
		// Appends to one entity are serialised: seq order is commit order
		// is position order.
		if i > 0 && f.Position <= facts[i-1].Position {
			t.Errorf("seq %d has position %d, not above seq %d's %d", f.Seq, f.Position, facts[i-1].Seq, facts[i-1].Position)
		}
	}
}

func testFactGlobalPositions(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))
	createEntity(t, s, newEntity("tnt_a", "ent_a2", "asset"))
	createEntity(t, s, newEntity("tnt_b", "ent_b1", "account"))

	posOf := map[string]int64{}
	var last int64
	record := func(res []store.AppendResult) {
		t.Helper()
		for _, r := range res {
			posOf[r.Fact.ID] = r.Fact.Position
			// Sequential calls: every position is above the previous one.
			if r.Fact.Position <= last {
				t.Errorf("fact %s: position %d not above the previous %d", r.Fact.ID, r.Fact.Position, last)
			}
			last = r.Fact.Position
		}
	}
	record(appendOK(t, s, store.Append{Fact: newFact("tnt_a", "ent_a1", "fct_s01")}))
	record(appendOK(t, s,
		store.Append{Fact: newFact("tnt_b", "ent_b1", "fct_s02")},
		store.Append{Fact: newFact("tnt_a", "ent_a2", "fct_s03")},
		store.Append{Fact: newFact("tnt_a", "", "fct_s04")},
	))
	record(appendOK(t, s, store.Append{Fact: newFact("tnt_b", "", "fct_s05")}))

	// Concurrent writers on different entities and tenants; each one's
	// calls commit in its own order.
	writers := []struct{ tenant, entity string }{{"tnt_a", "ent_a1"}, {"tnt_a", "ent_a2"}, {"tnt_b", "ent_b1"}, {"tnt_b", ""}}
	const perWriter = 8
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for w, wr := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev int64
			for i := range perWriter {
				id := fmt.Sprintf("fct_w%d_%02d", w, i)
				res, err := s.AppendFacts(ctx, []store.Append{{Fact: newFact(wr.tenant, wr.entity, id)}})
				if err != nil || len(res) != 1 || res[0].Err != nil {
					t.Errorf("AppendFacts %s: %v %+v", id, err, res)
					return
				}
				p := res[0].Fact.Position
				if p <= prev {
					t.Errorf("writer %d: position %d after %d", w, p, prev)
				}
				prev = p
				mu.Lock()
				posOf[id] = p
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	total := int64(len(posOf))
	facts, err := s.ReadFacts(ctx, 0, 1000)
	noErr(t, err, "ReadFacts")
	if got := positions(facts); !equalInts(got, seqRange(1, total)) {
		t.Fatalf("positions: got %v, want 1..%d", got, total)
	}
	for _, f := range facts {
		if posOf[f.ID] != f.Position {
			t.Errorf("fact %s: read at position %d, AppendFacts said %d", f.ID, f.Position, posOf[f.ID])
		}
	}
	head, err := s.HeadPosition(ctx)
	noErr(t, err, "HeadPosition")
	if head != total {
		t.Errorf("HeadPosition: got %d, want %d", head, total)
	}
}

func testFactEntityless(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))

	appendOne(t, s, newFact("tnt_a", "ent_a1", "fct_bound"))
	f := newFact("tnt_a", "", "fct_free")
	f.Type, f.Subtype = "audit", "login"
	r := appendOne(t, s, f)
	want := f
	want.Seq, want.Position = 0, 2
	checkFact(t, &r.Fact, want)
	if r.EntityVersion != 0 {
		t.Errorf("EntityVersion of an entity-less fact: got %d, want 0", r.EntityVersion)
	}
	got, err := s.GetFact(ctx, "tnt_a", "fct_free")
	noErr(t, err, "GetFact")
	checkFact(t, got, want)

	// A second one also gets seq 0 (no per-tenant ledger of unbound facts).
	r = appendOne(t, s, newFact("tnt_a", "", "fct_free2"))
	if r.Fact.Seq != 0 || r.Fact.Position != 3 {
		t.Errorf("second entity-less fact: seq %d position %d, want 0 and 3", r.Fact.Seq, r.Fact.Position)
	}
}

func testFactAppendMixedBatch(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_e1", "account"))
	createEntity(t, s, newEntity("tnt_a", "ent_e2", "asset"))
	// fct_dup exists before the batch: e2 seq 1, position 1, e2 version 2.
	appendOne(t, s, newFact("tnt_a", "ent_e2", "fct_dup"))

	bad := func(n int) json.RawMessage { return raw(fmt.Sprintf(`{"bad":%d}`, n)) }
	items := []store.Append{
		0: {Fact: newFact("tnt_a", "ent_e1", "fct_m0"), State: raw(`{"good":0}`)},
		1: {Fact: newFact("tnt_a", "ent_missing", "fct_m1"), State: bad(1)},
		2: {Fact: newFact("tnt_a", "ent_e1", "fct_m2")},
		3: {Fact: newFact("tnt_a", "ent_e1", "fct_m3"), ExpectedVersion: 1, State: bad(3)}, // e1 is at 3 by now
		4: {Fact: newFact("tnt_a", "ent_e1", "fct_dup"), State: bad(4)},                    // id taken before the batch
		5: {Fact: newFact("tnt_a", "ent_e2", "fct_m5"), ExpectedVersion: 2},
		6: {Fact: newFact("tnt_a", "ent_e2", "fct_m0"), State: bad(6)}, // id taken by item 0
		7: {Fact: newFact("tnt_a", "ent_e1", "fct_m7"), ExpectedVersion: 3},
		8: {Fact: newFact("tnt_a", "", "fct_m8")},
		9: {Fact: newFact("tnt_b", "ent_e1", "fct_m9"), State: bad(9)}, // e1 is tnt_a's
	}
	res, err := s.AppendFacts(ctx, items)
	noErr(t, err, "AppendFacts")
	if len(res) != len(items) {
		t.Fatalf("got %d results for %d items", len(res), len(items))
	}
	type want struct {
		err           error
		seq, position int64
		version       int64
	}
	wants := []want{
		0: {nil, 1, 2, 2},
		1: {err: store.ErrNotFound},
		2: {nil, 2, 3, 3},
		3: {err: store.ErrVersionConflict},
		4: {err: store.ErrAlreadyExists},
		5: {nil, 2, 4, 3},
		6: {err: store.ErrAlreadyExists},
		7: {nil, 3, 5, 4},
		8: {nil, 0, 6, 0},
		9: {err: store.ErrNotFound},
	}
	for i, w := range wants {
		r := res[i]
		if w.err != nil {
			if !errors.Is(r.Err, w.err) {
				t.Errorf("item %d (%s): Err %v, want %v", i, items[i].Fact.ID, r.Err, w.err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("item %d (%s): unexpected Err %v", i, items[i].Fact.ID, r.Err)
			continue
		}
		if r.Fact.Seq != w.seq || r.Fact.Position != w.position || r.EntityVersion != w.version {
			t.Errorf("item %d (%s): seq %d position %d version %d, want %d %d %d", i, items[i].Fact.ID,
				r.Fact.Seq, r.Fact.Position, r.EntityVersion, w.seq, w.position, w.version)
		}
	}

	// Failed items wrote nothing: the log holds exactly the good facts,
	// at gapless positions.
	facts, err := s.ReadFacts(ctx, 0, 100)
	noErr(t, err, "ReadFacts")
	wantIDs := []string{"fct_dup", "fct_m0", "fct_m2", "fct_m5", "fct_m7", "fct_m8"}
	if ids := factIDs(facts); !equalStrings(ids, wantIDs) {
		t.Errorf("ReadFacts ids: got %v, want %v", ids, wantIDs)
	}
	if got := positions(facts); !equalInts(got, seqRange(1, 6)) {
		t.Errorf("ReadFacts positions: got %v, want 1..6", got)
	}
	for _, id := range []string{"fct_m1", "fct_m3", "fct_m9"} {
		_, err := s.GetFact(ctx, "tnt_a", id)
		wantErr(t, err, store.ErrNotFound, "GetFact of failed item "+id)
		_, err = s.GetFact(ctx, "tnt_b", id)
		wantErr(t, err, store.ErrNotFound, "GetFact of failed item "+id+" in tnt_b")
	}
	// The duplicates did not overwrite the originals.
	dup, err := s.GetFact(ctx, "tnt_a", "fct_dup")
	noErr(t, err, "GetFact fct_dup")
	if dup.EntityID != "ent_e2" || dup.Seq != 1 || dup.Position != 1 {
		t.Errorf("fct_dup changed: %+v", dup)
	}
	m0, err := s.GetFact(ctx, "tnt_a", "fct_m0")
	noErr(t, err, "GetFact fct_m0")
	if m0.EntityID != "ent_e1" || m0.Seq != 1 {
		t.Errorf("fct_m0 changed: %+v", m0)
	}

	e1Facts, err := s.ListEntityFacts(ctx, "tnt_a", "ent_e1", 0, 100)
	noErr(t, err, "ListEntityFacts e1")
	if ids := factIDs(e1Facts); !equalStrings(ids, []string{"fct_m0", "fct_m2", "fct_m7"}) {
		t.Errorf("e1 facts: got %v", ids)
	}
	for i, f := range e1Facts {
		if f.Seq != int64(i+1) {
			t.Errorf("e1 fact %s: seq %d, want %d", f.ID, f.Seq, i+1)
		}
	}
	e1, err := s.GetEntity(ctx, "tnt_a", "ent_e1")
	noErr(t, err, "GetEntity e1")
	if e1.Version != 4 {
		t.Errorf("e1 version: got %d, want 4", e1.Version)
	}
	checkJSON(t, "e1 state (failed items must not set it)", e1.State, raw(`{"good":0}`))
	e2, err := s.GetEntity(ctx, "tnt_a", "ent_e2")
	noErr(t, err, "GetEntity e2")
	if e2.Version != 3 {
		t.Errorf("e2 version: got %d, want 3", e2.Version)
	}
	checkJSON(t, "e2 state (failed items must not set it)", e2.State, nil)
}

func testFactAppendState(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	e := newEntity("tnt_a", "ent_a1", "account")
	e.State = raw(`{"balance":0}`)
	createEntity(t, s, e)

	steps := []struct {
		state json.RawMessage // set on the append; nil keeps the snapshot
		want  json.RawMessage
	}{
		{raw(`{"balance":100}`), raw(`{"balance":100}`)},
		{nil, raw(`{"balance":100}`)},
		{raw(`{"balance":70,"last":"charge"}`), raw(`{"last":"charge","balance":70}`)},
	}
	for i, st := range steps {
		r := appendOK(t, s, store.Append{Fact: newFact("tnt_a", "ent_a1", fmt.Sprintf("fct_%d", i)), State: st.state})[0]
		got, err := s.GetEntity(ctx, "tnt_a", "ent_a1")
		noErr(t, err, "GetEntity")
		checkJSON(t, fmt.Sprintf("state after append %d", i), got.State, st.want)
		if got.Version != int64(i+2) || r.EntityVersion != got.Version {
			t.Errorf("append %d: entity version %d, result says %d, want %d", i, got.Version, r.EntityVersion, i+2)
		}
		checkJSON(t, "data", got.Data, e.Data)
	}
}

func testFactAppendExpectedVersion(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))
	// An entity update also moves the version the facts are checked against.
	_, err := s.UpdateEntity(ctx, store.EntityUpdate{TenantID: "tnt_a", ID: "ent_a1", ExpectedVersion: 1, Data: raw(`{}`), UpdatedAt: t0})
	noErr(t, err, "UpdateEntity")

	r := appendOK(t, s, store.Append{Fact: newFact("tnt_a", "ent_a1", "fct_1"), ExpectedVersion: 2})[0]
	if r.EntityVersion != 3 || r.Fact.Seq != 1 {
		t.Errorf("append at version 2: version %d seq %d, want 3 and 1", r.EntityVersion, r.Fact.Seq)
	}
	for _, v := range []int64{1, 2, 4} {
		res, err := s.AppendFacts(ctx, []store.Append{{Fact: newFact("tnt_a", "ent_a1", fmt.Sprintf("fct_x%d", v)), ExpectedVersion: v}})
		noErr(t, err, "AppendFacts")
		if !errors.Is(res[0].Err, store.ErrVersionConflict) {
			t.Errorf("ExpectedVersion %d at version 3: Err %v, want ErrVersionConflict", v, res[0].Err)
		}
	}
	r = appendOK(t, s, store.Append{Fact: newFact("tnt_a", "ent_a1", "fct_2"), ExpectedVersion: 3})[0]
	if r.EntityVersion != 4 || r.Fact.Seq != 2 || r.Fact.Position != 2 {
		t.Errorf("append at version 3: version %d seq %d position %d, want 4, 2, 2", r.EntityVersion, r.Fact.Seq, r.Fact.Position)
	}
}

func testFactGet(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))
	r := appendOne(t, s, newFact("tnt_a", "ent_a1", "fct_1"))

	got, err := s.GetFact(ctx, "tnt_a", "fct_1")
	noErr(t, err, "GetFact")
	checkFact(t, got, r.Fact)
	_, err = s.GetFact(ctx, "tnt_a", "fct_none")
	wantErr(t, err, store.ErrNotFound, "GetFact of a missing id")
	_, err = s.GetFact(ctx, "tnt_b", "fct_1")
	wantErr(t, err, store.ErrNotFound, "GetFact of another tenant's fact")
}

func testFactListEntityFacts(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))
	createEntity(t, s, newEntity("tnt_a", "ent_a2", "account"))
	createEntity(t, s, newEntity("tnt_b", "ent_a1", "account"))

	// Interleave facts of other entities, of the same id in another tenant
	// and without entity.
	var mine []store.Fact
	for i := 1; i <= 5; i++ {
		mine = append(mine, appendOne(t, s, newFact("tnt_a", "ent_a1", fmt.Sprintf("fct_a1_%d", i))).Fact)
		appendOne(t, s, newFact("tnt_a", "ent_a2", fmt.Sprintf("fct_a2_%d", i)))
		appendOne(t, s, newFact("tnt_b", "ent_a1", fmt.Sprintf("fct_b_%d", i)))
		appendOne(t, s, newFact("tnt_a", "", fmt.Sprintf("fct_free_%d", i)))
	}

	tests := []struct {
		afterSeq int64
		limit    int
		wantSeqs []int64
	}{
		{0, 10, []int64{1, 2, 3, 4, 5}},
		{0, 2, []int64{1, 2}},
		{2, 2, []int64{3, 4}},
		{3, 10, []int64{4, 5}},
		{4, 1, []int64{5}},
		{5, 10, nil},
		{99, 10, nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("after=%d,limit=%d", tc.afterSeq, tc.limit), func(t *testing.T) {
			got, err := s.ListEntityFacts(ctx, "tnt_a", "ent_a1", tc.afterSeq, tc.limit)
			noErr(t, err, "ListEntityFacts")
			var seqs []int64
			for _, f := range got {
				seqs = append(seqs, f.Seq)
			}
			if !equalInts(seqs, tc.wantSeqs) {
				t.Fatalf("seqs: got %v, want %v", seqs, tc.wantSeqs)
			}
			for _, f := range got {
				checkFact(t, &f, mine[f.Seq-1])
			}
		})
	}
}

func testFactReadFacts(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	head, err := s.HeadPosition(ctx)
	noErr(t, err, "HeadPosition")
	if head != 0 {
		t.Errorf("HeadPosition of an empty store: got %d, want 0", head)
	}
	facts, err := s.ReadFacts(ctx, 0, 10)
	noErr(t, err, "ReadFacts")
	if len(facts) != 0 {
		t.Errorf("ReadFacts of an empty store: got %d facts", len(facts))
	}

	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))
	createEntity(t, s, newEntity("tnt_b", "ent_b1", "asset"))
	var all []store.Fact
	for _, f := range []store.Fact{
		newFact("tnt_a", "ent_a1", "fct_1"),
		newFact("tnt_b", "ent_b1", "fct_2"),
		newFact("tnt_a", "", "fct_3"),
		newFact("tnt_b", "ent_b1", "fct_4"),
		newFact("tnt_c", "", "fct_5"),
		newFact("tnt_a", "ent_a1", "fct_6"),
	} {
		all = append(all, appendOne(t, s, f).Fact)
	}

	tests := []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 100, []int64{1, 2, 3, 4, 5, 6}},
		{0, 2, []int64{1, 2}},
		{2, 3, []int64{3, 4, 5}},
		{5, 10, []int64{6}},
		{6, 10, nil},
		{100, 10, nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("after=%d,limit=%d", tc.after, tc.limit), func(t *testing.T) {
			got, err := s.ReadFacts(ctx, tc.after, tc.limit)
			noErr(t, err, "ReadFacts")
			if p := positions(got); !equalInts(p, tc.want) {
				t.Fatalf("positions: got %v, want %v", p, tc.want)
			}
			for _, f := range got {
				checkFact(t, &f, all[f.Position-1])
			}
		})
	}
	head, err = s.HeadPosition(ctx)
	noErr(t, err, "HeadPosition")
	if head != 6 {
		t.Errorf("HeadPosition: got %d, want 6", head)
	}
}

func testFactDataRoundTrip(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))

	tests := []struct{ name, data string }{
		{"empty object", `{}`},
		{"key order", `{"zeta":1,"alpha":2,"mid":{"y":true,"b":false}}`},
		{"nested arrays", `{"a":[[1,2],[],[{"k":"v"}]],"n":null}`},
		{"numbers", `{"int":42,"neg":-7,"frac":0.125,"exp":1.5e3,"zero":0}`},
		{"strings", `{"empty":"","quote":"say \"hi\"","nl":"a\nb","uni":"\u00e9t\u00e9 \u2603","emoji":"😀","slash":"a/b\\c"}`},
		{"whitespace", "{\n  \"spaced\" :  [ 1 , 2 ]\n}"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFact("tnt_a", "ent_a1", fmt.Sprintf("fct_%02d", i))
			f.Data = raw(tc.data)
			r := appendOne(t, s, f)
			checkJSON(t, "AppendFacts result data", r.Fact.Data, f.Data)
			got, err := s.GetFact(ctx, "tnt_a", f.ID)
			noErr(t, err, "GetFact")
			checkJSON(t, "GetFact data", got.Data, f.Data)
			read, err := s.ReadFacts(ctx, r.Fact.Position-1, 1)
			noErr(t, err, "ReadFacts")
			if len(read) != 1 {
				t.Fatalf("ReadFacts: got %d facts, want 1", len(read))
			}
			checkJSON(t, "ReadFacts data", read[0].Data, f.Data)
		})
	}
}

// testFactCommitOrder holds one AppendFacts transaction open in the
// BeforeAppendCommit hook while a second AppendFacts runs, and checks that
// a polling reader only ever sees a gapless prefix of positions: a later
// position must never become visible before an earlier one commits.
func testFactCommitOrder(t *testing.T, open Factory) {
	var (
		calls   int
		callsMu sync.Mutex
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	hooks := store.Hooks{BeforeAppendCommit: func(ctx context.Context) {
		callsMu.Lock()
		calls++
		first := calls == 1
		callsMu.Unlock()
		if !first {
			return
		}
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	s := setup(t, open, hooks)
	t.Cleanup(releaseAll) // never leave the writer blocked, even on failure
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))
	createEntity(t, s, newEntity("tnt_b", "ent_b1", "account"))

	type outcome struct {
		res []store.AppendResult
		err error
	}
	doneA, doneB := make(chan outcome, 1), make(chan outcome, 1)
	go func() {
		res, err := s.AppendFacts(ctx, []store.Append{{Fact: newFact("tnt_a", "ent_a1", "fct_a")}})
		doneA <- outcome{res, err}
	}()
	waitDone(t, entered, "the first AppendFacts to reach BeforeAppendCommit")

	// The reader polls from the start of the log, checking every snapshot
	// is 1..k with k never shrinking, until stopped.
	var (
		readerMu  sync.Mutex
		readerErr error
		seenMax   int64
		snapshots int
	)
	check := func() error {
		facts, err := s.ReadFacts(ctx, 0, 100)
		if err != nil {
			return fmt.Errorf("ReadFacts: %w", err)
		}
		p := positions(facts)
		if !equalInts(p, seqRange(1, int64(len(p)))) {
			return fmt.Errorf("reader saw positions %v: not a gapless prefix 1..k", p)
		}
		readerMu.Lock()
		defer readerMu.Unlock()
		snapshots++
		if int64(len(p)) < seenMax {
			return fmt.Errorf("reader saw %d facts after having seen %d", len(p), seenMax)
		}
		seenMax = int64(len(p))
		return nil
	}
	stopReader, readerDone := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() { close(stopReader) })
		<-readerDone
	}
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stopReader:
				return
			default:
			}
			if err := check(); err != nil {
				readerMu.Lock()
				readerErr = err
				readerMu.Unlock()
				return
			}
			runtime.Gosched()
		}
	}()
	t.Cleanup(stop) // runs before the store is closed

	go func() {
		res, err := s.AppendFacts(ctx, []store.Append{{Fact: newFact("tnt_b", "ent_b1", "fct_b")}})
		doneB <- outcome{res, err}
	}()

	// Give the second writer a bounded chance to (wrongly) commit while the
	// first is held. A correct store keeps it waiting, and the test passes
	// however long this takes; a store that lets it through is caught by
	// the reader or by the check right below.
	var b outcome
	bFinishedEarly := false
	select {
	case b = <-doneB:
		bFinishedEarly = true
	case <-time.After(300 * time.Millisecond):
	}
	if err := check(); err != nil {
		t.Errorf("while the first append is held: %v", err)
	}
	if bFinishedEarly {
		t.Errorf("the second AppendFacts returned while the first was still open: err %v, results %+v", b.err, b.res)
	}

	releaseAll()
	a := waitDone(t, doneA, "the first AppendFacts to return")
	if !bFinishedEarly {
		b = waitDone(t, doneB, "the second AppendFacts to return")
	}
	for name, o := range map[string]outcome{"first": a, "second": b} {
		if o.err != nil || len(o.res) != 1 || o.res[0].Err != nil {
			t.Fatalf("%s AppendFacts: err %v, results %+v", name, o.err, o.res)
		}
	}
	if pa, pb := a.res[0].Fact.Position, b.res[0].Fact.Position; pa != 1 || pb != 2 {
		t.Errorf("positions: first %d, second %d; want 1 and 2", pa, pb)
	}

	// Stop the reader, then look at the final state once more.
	stop()
	if readerErr != nil {
		t.Errorf("reader: %v", readerErr)
	}
	if err := check(); err != nil {
		t.Errorf("after both appends: %v", err)
	}
	facts, err := s.ReadFacts(ctx, 0, 100)
	noErr(t, err, "ReadFacts")
	if ids := factIDs(facts); !equalStrings(ids, []string{"fct_a", "fct_b"}) {
		t.Errorf("final log: got %v, want [fct_a fct_b]", ids)
	}
	t.Logf("reader took %d snapshots", snapshots)
}

func testFactSubscribe(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))

	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.SubscribeFacts(subCtx)
	noErr(t, err, "SubscribeFacts")
	// A subscriber that never reads must not hold up writers.
	idle, err := s.SubscribeFacts(subCtx)
	noErr(t, err, "SubscribeFacts (idle)")
	_ = idle

	drain := func() {
		for {
			select {
			case <-ch:
			default:
				return
			}
		}
	}

	for i := range 3 {
		drain()
		appendOne(t, s, newFact("tnt_a", "ent_a1", fmt.Sprintf("fct_%d", i)))
		waitDone(t, ch, fmt.Sprintf("a notification after append %d", i))
	}

	// Many appends in a row: the signals may coalesce but at least one
	// arrives, and the writers never block on the idle subscriber.
	drain()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			if _, err := s.AppendFacts(ctx, []store.Append{{Fact: newFact("tnt_a", "", fmt.Sprintf("fct_burst_%d", i))}}); err != nil {
				t.Errorf("AppendFacts: %v", err)
				return
			}
		}
	}()
	waitDone(t, done, "20 appends with an idle subscriber")
	waitDone(t, ch, "a notification after the burst")

	// Cancelling the context closes the channel.
	cancel()
	closed := make(chan struct{})
	go func() {
		for range ch {
		}
		close(closed)
	}()
	waitDone(t, closed, "the channel to close after its context ended")
}

func testFactScan(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_acc", "account"))
	createEntity(t, s, newEntity("tnt_a", "ent_ast", "asset"))
	createEntity(t, s, newEntity("tnt_b", "ent_acc", "account"))
	fact := func(tenant, entity, id, typ string, ts int64) store.Fact {
		f := newFact(tenant, entity, id)
		f.Type, f.Timestamp = typ, ts
		return f
	}
	// Appended out of time order: the scan orders by timestamp, then by
	// position among equal timestamps.
	for _, f := range []store.Fact{
		fact("tnt_a", "ent_acc", "fct_1", "deposit", t0+30),
		fact("tnt_a", "ent_acc", "fct_2", "deposit", t0+10),
		fact("tnt_a", "ent_acc", "fct_3", "charge", t0+20),
		fact("tnt_a", "ent_ast", "fct_4", "deposit", t0+20),
		fact("tnt_b", "ent_acc", "fct_5", "deposit", t0+20),
		fact("tnt_a", "", "fct_6", "deposit", t0+40),
		fact("tnt_a", "ent_acc", "fct_7", "deposit", t0+30),
	} {
		appendOne(t, s, f)
	}
	tests := []struct {
		name string
		q    store.FactScan
		want []string
	}{
		{"one type", store.FactScan{TenantID: "tnt_a", Types: []string{"deposit"}},
			[]string{"fct_2", "fct_4", "fct_1", "fct_7", "fct_6"}},
		{"two types", store.FactScan{TenantID: "tnt_a", Types: []string{"deposit", "charge"}},
			[]string{"fct_2", "fct_3", "fct_4", "fct_1", "fct_7", "fct_6"}},
		{"entity type", store.FactScan{TenantID: "tnt_a", Types: []string{"deposit", "charge"}, EntityType: "account"},
			[]string{"fct_2", "fct_3", "fct_1", "fct_7"}},
		{"from", store.FactScan{TenantID: "tnt_a", Types: []string{"deposit"}, From: t0 + 20},
			[]string{"fct_4", "fct_1", "fct_7", "fct_6"}},
		{"to", store.FactScan{TenantID: "tnt_a", Types: []string{"deposit"}, To: t0 + 20},
			[]string{"fct_2", "fct_4"}},
		{"from and to", store.FactScan{TenantID: "tnt_a", Types: []string{"deposit"}, From: t0 + 20, To: t0 + 30},
			[]string{"fct_4", "fct_1", "fct_7"}},
		{"other tenant", store.FactScan{TenantID: "tnt_b", Types: []string{"deposit"}}, []string{"fct_5"}},
		{"unknown tenant", store.FactScan{TenantID: "tnt_x", Types: []string{"deposit"}}, nil},
		{"unknown type", store.FactScan{TenantID: "tnt_a", Types: []string{"refund"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := s.ScanFacts(ctx, tt.q, func(f *store.Fact) error {
				if f.TenantID != tt.q.TenantID {
					t.Errorf("fact %s of tenant %s in a scan of %s", f.ID, f.TenantID, tt.q.TenantID)
				}
				got = append(got, f.ID)
				return nil
			})
			noErr(t, err, "ScanFacts")
			if !equalStrings(got, tt.want) {
				t.Errorf("ScanFacts: got %v, want %v", got, tt.want)
			}
		})
	}

	stop := errors.New("stop")
	n := 0
	err := s.ScanFacts(ctx, store.FactScan{TenantID: "tnt_a", Types: []string{"deposit"}}, func(*store.Fact) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("ScanFacts with a failing callback: %d calls, err %v; want 1 call and the callback's error", n, err)
	}
	if err := s.ScanFacts(ctx, store.FactScan{TenantID: "tnt_a"}, func(*store.Fact) error { return nil }); err == nil {
		t.Error("ScanFacts without fact types: no error")
	}
}

// testFactList: ListFacts filters one tenant's facts, entity-less ones
// included, and pages through them in position order.
func testFactList(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_acc", "account"))
	createEntity(t, s, newEntity("tnt_b", "ent_acc", "account"))
	fact := func(tenant, entity, id, typ, subtype, source string, ts int64) store.Fact {
		f := newFact(tenant, entity, id)
		f.Type, f.Subtype, f.SourceID, f.Timestamp = typ, subtype, source, ts
		return f
	}
	// Appended out of time order: listings are in position order.
	for _, f := range []store.Fact{
		fact("tnt_a", "ent_acc", "fct_1", "outcome", "deal_won", "", t0+30),
		fact("tnt_a", "", "fct_2", "webhook", "triggered", "fct_1", t0+10),
		fact("tnt_a", "", "fct_3", "webhook", "sent", "fct_2", t0+20),
		fact("tnt_b", "", "fct_4", "webhook", "sent", "fct_2", t0+20),
		fact("tnt_a", "", "fct_5", "webhook", "sent", "fct_2", t0+40),
		fact("tnt_a", "ent_acc", "fct_6", "outcome", "", "", t0+50),
	} {
		appendOne(t, s, f)
	}
	tests := []struct {
		name string
		f    store.FactFilter
		want []string
	}{
		{"tenant", store.FactFilter{TenantID: "tnt_a"}, []string{"fct_1", "fct_2", "fct_3", "fct_5", "fct_6"}},
		{"type", store.FactFilter{TenantID: "tnt_a", Type: "webhook"}, []string{"fct_2", "fct_3", "fct_5"}},
		{"type and subtype", store.FactFilter{TenantID: "tnt_a", Type: "webhook", Subtype: "sent"}, []string{"fct_3", "fct_5"}},
		{"source", store.FactFilter{TenantID: "tnt_a", SourceID: "fct_2"}, []string{"fct_3", "fct_5"}},
		{"entity", store.FactFilter{TenantID: "tnt_a", EntityID: "ent_acc"}, []string{"fct_1", "fct_6"}},
		{"from", store.FactFilter{TenantID: "tnt_a", From: t0 + 30}, []string{"fct_1", "fct_5", "fct_6"}},
		{"to", store.FactFilter{TenantID: "tnt_a", To: t0 + 20}, []string{"fct_2", "fct_3"}},
		{"from and to with type", store.FactFilter{TenantID: "tnt_a", Type: "webhook", From: t0 + 20, To: t0 + 40}, []string{"fct_3", "fct_5"}},
		{"every filter", store.FactFilter{TenantID: "tnt_a", Type: "webhook", Subtype: "sent", SourceID: "fct_2", From: t0 + 40}, []string{"fct_5"}},
		{"after a position", store.FactFilter{TenantID: "tnt_a", AfterPosition: 3}, []string{"fct_5", "fct_6"}},
		{"limit", store.FactFilter{TenantID: "tnt_a", Limit: 2}, []string{"fct_1", "fct_2"}},
		{"other tenant", store.FactFilter{TenantID: "tnt_b", SourceID: "fct_2"}, []string{"fct_4"}},
		{"another tenant's entity", store.FactFilter{TenantID: "tnt_b", EntityID: "ent_acc"}, nil},
		{"no match", store.FactFilter{TenantID: "tnt_a", Type: "refund"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.f.Limit == 0 {
				tt.f.Limit = 100
			}
			got, err := s.ListFacts(ctx, tt.f)
			noErr(t, err, "ListFacts")
			if ids := factIDs(got); !equalStrings(ids, tt.want) {
				t.Errorf("ListFacts: got %v, want %v", ids, tt.want)
			}
			for _, f := range got {
				if f.TenantID != tt.f.TenantID {
					t.Errorf("fact %s of tenant %s listed for %s", f.ID, f.TenantID, tt.f.TenantID)
				}
			}
		})
	}
	// Paging with the last position as the cursor visits every fact once.
	var all []string
	after := int64(0)
	for {
		page, err := s.ListFacts(ctx, store.FactFilter{TenantID: "tnt_a", AfterPosition: after, Limit: 2})
		noErr(t, err, "ListFacts page")
		if len(page) == 0 {
			break
		}
		all = append(all, factIDs(page)...)
		after = page[len(page)-1].Position
	}
	if want := []string{"fct_1", "fct_2", "fct_3", "fct_5", "fct_6"}; !equalStrings(all, want) {
		t.Errorf("pages: got %v, want %v", all, want)
	}
}
