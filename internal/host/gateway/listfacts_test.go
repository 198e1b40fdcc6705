package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

// TestListFactsFiltersAndPages: GET /v1/facts lists the tenant's facts in
// commit order, entity-less ones (webhook audit facts) included, by each
// filter, and pages through them with the cursor.
func TestListFactsFiltersAndPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		ctx := t.Context()
		id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
		deposit := str(h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "subtype": "manual",
			"timestamp": 1_700_000_000_000, "data": map[string]any{"amount": "1"}}).wantStatus(t, 201).data()["id"])
		other := str(h.req("POST", "/v1/entities", h.keyB, validAccount).wantStatus(t, 201).data()["id"])
		h.req("POST", "/v1/facts", h.keyB, map[string]any{"entity_id": other, "type": "deposit", "data": map[string]any{"amount": "1"}}).wantStatus(t, 201)
		// Entity-less audit facts, as the webhook service writes them.
		audit := func(tenant, fid, subtype, source string, ts int64) {
			_, err := h.store.AppendFacts(ctx, []store.Append{{Fact: store.Fact{ID: fid, TenantID: tenant, Type: "webhook",
				Subtype: subtype, SourceID: source, Timestamp: ts, Data: json.RawMessage(`{}`), CreatedAt: ts}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		audit("tenant-a", "fct_trig", "triggered", deposit, 1_700_000_001_000)
		audit("tenant-a", "fct_sent1", "sent", "fct_trig", 1_700_000_002_000)
		audit("tenant-b", "fct_sentb", "sent", "fct_trig", 1_700_000_002_000)
		audit("tenant-a", "fct_sent2", "sent", "fct_trig", 1_700_000_003_000)

		ids := func(query string) []string {
			t.Helper()
			d := h.req("GET", "/v1/facts"+query, h.keyA, nil).wantStatus(t, 200).data()
			var out []string
			for _, it := range d["items"].([]any) {
				f := it.(map[string]any)
				if f["tenant_id"] != "tenant-a" {
					t.Fatalf("%s: fact of tenant %v", query, f["tenant_id"])
				}
				out = append(out, str(f["id"]))
			}
			return out
		}
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"", []string{deposit, "fct_trig", "fct_sent1", "fct_sent2"}},
			{"?type=webhook", []string{"fct_trig", "fct_sent1", "fct_sent2"}},
			{"?type=webhook&subtype=sent", []string{"fct_sent1", "fct_sent2"}},
			{"?source_id=fct_trig", []string{"fct_sent1", "fct_sent2"}},
			{"?source_id=" + deposit, []string{"fct_trig"}},
			{"?entity_id=" + id, []string{deposit}},
			{"?entity_id=" + other, nil}, // another tenant's entity
			{"?from=1700000002000", []string{"fct_sent1", "fct_sent2"}},
			{"?to=" + url.QueryEscape("2023-11-14T22:13:21Z"), []string{deposit, "fct_trig"}},
			{"?type=webhook&from=" + url.QueryEscape("2023-11-14T22:13:22Z") + "&to=1700000002000", []string{"fct_sent1"}},
			{"?type=refund", nil},
		} {
			if got := ids(tc.query); !slices.Equal(got, tc.want) {
				t.Errorf("GET /v1/facts%s: %v, want %v", tc.query, got, tc.want)
			}
		}

		// Pages in commit order, across an append made between pages.
		d := h.req("GET", "/v1/facts?limit=2", h.keyA, nil).wantStatus(t, 200).data()
		if d["hasMore"] != true || str(d["cursor"]) == "" {
			t.Fatalf("page 1: %v", d)
		}
		got := []string{str(d["items"].([]any)[0].(map[string]any)["id"]), str(d["items"].([]any)[1].(map[string]any)["id"])}
		audit("tenant-a", "fct_sent3", "sent", "fct_trig", 1_600_000_000_000)
		for cursor := str(d["cursor"]); cursor != ""; {
			d = h.req("GET", "/v1/facts?limit=2&cursor="+cursor, h.keyA, nil).wantStatus(t, 200).data()
			for _, it := range d["items"].([]any) {
				got = append(got, str(it.(map[string]any)["id"]))
			}
			cursor = str(d["cursor"])
			if (cursor != "") != (d["hasMore"] == true) {
				t.Fatalf("cursor %q with hasMore %v", cursor, d["hasMore"])
			}
		}
		if want := []string{deposit, "fct_trig", "fct_sent1", "fct_sent2", "fct_sent3"}; !slices.Equal(got, want) {
			t.Fatalf("pages: %v, want %v", got, want)
		}
	})
}

// TestListFactsRefusesBadFilters: bad query parameters are 400 problems
// naming the parameter, never a 500 and never an unfiltered listing.
func TestListFactsRefusesBadFilters(t *testing.T) {
	h := setup(t, "sqlite")
	for _, tc := range []struct {
		query, field, code string
	}{
		{"?subtype=sent", "subtype", "required"},
		{"?from=yesterday", "from", "format"},
		{"?to=-5", "to", "format"},
		{"?from=1700000002000&to=1700000001000", "to", "range"},
		{"?limit=500", "limit", "range"},
		{"?limit=x", "limit", "type"},
		{"?cursor=%25%25", "cursor", "format"},
		{"?cursor=azpub3Bl", "cursor", "format"},
		{"?sourceId=fct_1", "sourceId", "unknown_field"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := h.req("GET", "/v1/facts"+tc.query, h.keyA, nil)
			r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
			if got := r.fieldErrors(); fmt.Sprint(got) != fmt.Sprint(map[string]string{tc.field: tc.code}) {
				t.Fatalf("field errors %v, want %s: %s", got, tc.field, tc.code)
			}
		})
	}
	h.req("GET", "/v1/facts", "", nil).wantStatus(t, 401)
}
