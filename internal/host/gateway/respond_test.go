package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/factline/factline/internal/host/platform"
)

// checkEntityEnvelope compares the hand-written entity envelope with what
// encoding/json makes of the same value.
func checkEntityEnvelope(t *testing.T, v platform.EntityView, m Meta) {
	t.Helper()
	want, werr := jsonMarshal(Envelope{Data: v, Meta: m})
	got, ok := appendEntityEnvelope(nil, &v, m)
	switch {
	case ok && werr != nil:
		t.Fatalf("%+v: rendered %s where encoding/json fails (%v)", v, got, werr)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("%+v:\n got %s\nwant %s", v, got, want)
	}
}

var envelopeSeeds = []platform.EntityView{
	{ID: "acct-1", Type: "account", TenantID: "bench", Version: 7, Data: json.RawMessage(`{"name": "Gateway bench", "status": "active", "n": 1.50}`),
		Metadata: json.RawMessage(`{}`), CreatedAt: 1763740000000, UpdatedAt: 1763740000001},
	{ID: "ent_01JD3X8Y9Z", Type: "deal", TenantID: "t.a-b_c", Version: 1, Data: json.RawMessage(` { "a" : [ 1 , 2 ] , "s" : "<&>\u2028é\"" } `),
		Metadata: json.RawMessage(`{"k":null}`), CreatedAt: -1},
	{ID: `quote"d`, Type: "x", Data: json.RawMessage(`{}`)},
	{ID: "back\\slash", Data: json.RawMessage(`{}`)},
	{ID: "tab\there", Data: json.RawMessage(`{}`)},
	{ID: "é", Data: json.RawMessage(`{}`)},
	{ID: "a", Data: nil, Metadata: nil},
	{ID: "a", Data: json.RawMessage(``), Metadata: json.RawMessage(`{}`)},
	{ID: "a", Data: json.RawMessage(`{"unclosed": `), Metadata: json.RawMessage(`{}`)},
	{ID: "a", Data: json.RawMessage(`{"a":1} {"b":2}`), Metadata: json.RawMessage(`{}`)},
}

func TestEntityEnvelope(t *testing.T) {
	for _, v := range envelopeSeeds {
		checkEntityEnvelope(t, v, Meta{RequestID: "req_01JD3X8Y9Z", Timestamp: 1763740000123})
	}
	// The usual entity takes the fast path.
	if _, ok := appendEntityEnvelope(nil, &envelopeSeeds[0], Meta{RequestID: "req_1"}); !ok {
		t.Fatal("a plain entity did not take the fast path")
	}
}

func FuzzEntityEnvelope(f *testing.F) {
	for _, v := range envelopeSeeds {
		f.Add(v.ID, v.Type, v.TenantID, v.Version, []byte(v.Data), []byte(v.Metadata), "req_x", int64(5))
	}
	f.Fuzz(func(t *testing.T, id, typ, tenant string, version int64, data, metadata []byte, rid string, ts int64) {
		checkEntityEnvelope(t, platform.EntityView{ID: id, Type: typ, TenantID: tenant, Version: version, Data: data, Metadata: metadata,
			CreatedAt: ts, UpdatedAt: ts + 1}, Meta{RequestID: rid, Timestamp: ts})
	})
}
