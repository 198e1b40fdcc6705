package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// t0 is the base of the millisecond timestamps the suite writes.
const t0 int64 = 1_700_000_000_000

// waitLimit bounds every wait for another goroutine or a notification.
const waitLimit = 5 * time.Second

func ptr[T any](v T) *T { return &v }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// noErr fails the test on a non-nil error.
func noErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// decodeJSON decodes j for a semantic comparison; empty means absent.
func decodeJSON(j json.RawMessage) (v any, present bool, err error) {
	if len(j) == 0 {
		return nil, false, nil
	}
	err = json.Unmarshal(j, &v)
	return v, true, err
}

// jsonEqual reports whether got and want hold the same JSON value, key order
// and formatting aside. Both empty counts as equal.
func jsonEqual(got, want json.RawMessage) (bool, error) {
	g, gok, err := decodeJSON(got)
	if err != nil {
		return false, fmt.Errorf("got invalid JSON %q: %w", got, err)
	}
	w, wok, err := decodeJSON(want)
	if err != nil {
		return false, fmt.Errorf("want invalid JSON %q: %w", want, err)
	}
	return gok == wok && reflect.DeepEqual(g, w), nil
}

// checkJSON fails the test unless got and want hold the same JSON value.
func checkJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	ok, err := jsonEqual(got, want)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !ok {
		t.Errorf("%s: got %s, want %s", what, orAbsent(got), orAbsent(want))
	}
}

func orAbsent(j json.RawMessage) string {
	if len(j) == 0 {
		return "<absent>"
	}
	return string(j)
}

func slotsString(s store.Slots) string {
	var b strings.Builder
	for i, p := range s.S {
		if p != nil {
			fmt.Fprintf(&b, " %s=%q", store.SlotColumn(i, false), *p)
		}
	}
	for i, p := range s.N {
		if p != nil {
			fmt.Fprintf(&b, " %s=%v", store.SlotColumn(i, true), *p)
		}
	}
	if b.Len() == 0 {
		return "{}"
	}
	return "{" + b.String()[1:] + "}"
}

func entityString(e store.Entity) string {
	return fmt.Sprintf("{tenant=%q id=%q type=%q version=%d data=%s metadata=%s state=%s slots=%s created=%d updated=%d}",
		e.TenantID, e.ID, e.Type, e.Version, orAbsent(e.Data), orAbsent(e.Metadata), orAbsent(e.State),
		slotsString(e.Slots), e.CreatedAt, e.UpdatedAt)
}

// checkEntity compares every field of got with want, JSON fields by value.
func checkEntity(t *testing.T, got *store.Entity, want store.Entity) {
	t.Helper()
	if got == nil {
		t.Fatalf("entity %s: got nil", want.ID)
	}
	g, w := *got, want
	checkJSON(t, "entity "+w.ID+" data", g.Data, w.Data)
	checkJSON(t, "entity "+w.ID+" metadata", g.Metadata, w.Metadata)
	checkJSON(t, "entity "+w.ID+" state", g.State, w.State)
	g.Data, g.Metadata, g.State = nil, nil, nil
	w.Data, w.Metadata, w.State = nil, nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Errorf("entity %s:\n got %s\nwant %s", w.ID, entityString(*got), entityString(want))
	}
}

// checkFact compares every field of got with want, Data by value.
func checkFact(t *testing.T, got *store.Fact, want store.Fact) {
	t.Helper()
	if got == nil {
		t.Fatalf("fact %s: got nil", want.ID)
	}
	g, w := *got, want
	checkJSON(t, "fact "+w.ID+" data", g.Data, w.Data)
	g.Data, w.Data = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Errorf("fact %s:\n got %+v\nwant %+v", w.ID, g, w)
	}
}

func configString(c store.Config) string {
	sup := "nil"
	if c.SupersededAt != nil {
		sup = fmt.Sprint(*c.SupersededAt)
	}
	return fmt.Sprintf("{tenant=%q id=%q version=%d type=%q name=%q scope=%q/%q settings=%s status=%q superseded=%s effective=%d created=%d}",
		c.TenantID, c.ID, c.Version, c.Type, c.Name, c.ScopeType, c.ScopeID, orAbsent(c.Settings), c.Status, sup,
		c.EffectiveAt, c.CreatedAt)
}

// checkConfig compares every field of got with want, Settings by value.
func checkConfig(t *testing.T, got *store.Config, want store.Config) {
	t.Helper()
	if got == nil {
		t.Fatalf("config %s v%d: got nil", want.ID, want.Version)
	}
	g, w := *got, want
	checkJSON(t, fmt.Sprintf("config %s v%d settings", w.ID, w.Version), g.Settings, w.Settings)
	g.Settings, w.Settings = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Errorf("config %s v%d:\n got %s\nwant %s", w.ID, w.Version, configString(*got), configString(want))
	}
}

// newEntity returns an entity row ready for CreateEntity.
func newEntity(tenant, id, typ string) *store.Entity {
	return &store.Entity{
		TenantID:  tenant,
		ID:        id,
		Type:      typ,
		Data:      raw(`{"name":"` + id + `"}`),
		CreatedAt: t0,
		UpdatedAt: t0,
	}
}

func createEntity(t *testing.T, s store.Store, e *store.Entity) {
	t.Helper()
	noErr(t, s.CreateEntity(t.Context(), e), "CreateEntity "+e.ID)
}

// newFact returns a fact ready to append; entityID may be empty.
func newFact(tenant, entityID, id string) store.Fact {
	return store.Fact{
		ID:        id,
		TenantID:  tenant,
		EntityID:  entityID,
		Type:      "deposit",
		Timestamp: t0,
		Data:      raw(`{"fact":"` + id + `"}`),
		CreatedAt: t0 + 1,
	}
}

// appendOK appends items and fails the test when the call or any item
// fails.
func appendOK(t *testing.T, s store.Store, items ...store.Append) []store.AppendResult {
	t.Helper()
	res, err := s.AppendFacts(t.Context(), items)
	noErr(t, err, "AppendFacts")
	if len(res) != len(items) {
		t.Fatalf("AppendFacts: got %d results for %d items", len(res), len(items))
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("AppendFacts item %d (%s): %v", i, items[i].Fact.ID, r.Err)
		}
	}
	return res
}

// appendOne appends one fact and returns its result.
func appendOne(t *testing.T, s store.Store, f store.Fact) store.AppendResult {
	t.Helper()
	return appendOK(t, s, store.Append{Fact: f})[0]
}

// positions returns the positions of facts in order.
func positions(facts []store.Fact) []int64 {
	out := make([]int64, len(facts))
	for i, f := range facts {
		out[i] = f.Position
	}
	return out
}

func factIDs(facts []store.Fact) []string {
	out := make([]string, len(facts))
	for i, f := range facts {
		out[i] = f.ID
	}
	return out
}

func entityIDs(es []store.Entity) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func configIDs(cs []store.Config) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.TenantID + "/" + c.ID
	}
	return out
}

// seqRange returns from, from+1, ..., to.
func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// equalStrings compares string lists, treating nil and empty alike.
func equalStrings(got, want []string) bool {
	return len(got) == len(want) && (len(got) == 0 || slices.Equal(got, want))
}

func equalInts(got, want []int64) bool {
	return len(got) == len(want) && (len(got) == 0 || slices.Equal(got, want))
}

// waitDone waits for ch to be closed or to yield a value, or fails the test.
func waitDone[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}
