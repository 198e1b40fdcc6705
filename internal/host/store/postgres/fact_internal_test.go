package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

// TestListFactsFiltersUseAnIndex: on a table of many tenants' facts, the
// plan of every GET /v1/facts filter reads through an index on the tenant
// (never a Seq Scan of facts, nor a walk of the position key filtering
// every row), first page and later pages alike.
func TestListFactsFiltersUseAnIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	// 200 tenants x 100 facts, a third of them entity-less webhook facts
	// with a source, written directly: the plans depend on the rows and
	// their statistics, not on how they were appended.
	_, err := s.pool.Exec(ctx, `INSERT INTO facts (position, id, tenant_id, entity_id, seq, type, subtype, source_id, timestamp, created_at)
SELECT g, 'fct_' || g, 'tnt_' || (g % 200),
	CASE WHEN g % 3 = 0 THEN NULL ELSE 'ent_' || (g % 1000) END,
	CASE WHEN g % 3 = 0 THEN 0 ELSE g END,
	CASE WHEN g % 3 = 0 THEN 'webhook' ELSE 'deposit' END,
	CASE WHEN g % 3 = 0 THEN (CASE WHEN g % 2 = 0 THEN 'sent' ELSE 'triggered' END) ELSE 'manual' END,
	CASE WHEN g % 3 = 0 THEN 'fct_' || (g - 1) END,
	1700000000000 + g * 1000, 1700000000000 + g * 1000
FROM generate_series(1, 20000) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE facts`); err != nil {
		t.Fatal(err)
	}
	const tenant = "tnt_7"
	// Each filter names the indexes that serve it (the entity filter uses
	// the (tenant_id, entity_id, seq) key) and the condition the index
	// must apply, so the tenant's other facts are not read.
	const (
		byPosition = "facts_tenant_position"
		byType     = "facts_tenant_type"
		bySource   = "facts_tenant_source"
		byEntity   = "facts_tenant_id_entity_id_seq_key"
		byTime     = "facts_tenant_time"
		byTypeTime = "facts_scan"
	)
	filters := []struct {
		name    string
		f       store.FactFilter
		indexes []string
		cond    string
	}{
		{"tenant only", store.FactFilter{}, []string{byPosition}, "tenant_id ="},
		{"type", store.FactFilter{Type: "webhook"}, []string{byType, byTypeTime}, "type ="},
		{"type and subtype", store.FactFilter{Type: "webhook", Subtype: "sent"}, []string{byType}, "subtype ="},
		{"source_id", store.FactFilter{SourceID: "fct_2006"}, []string{bySource}, "source_id ="},
		{"entity_id", store.FactFilter{EntityID: "ent_7"}, []string{byEntity}, "entity_id ="},
		{"from", store.FactFilter{From: 1700000000000 + 19000*1000}, []string{byTime}, `"timestamp" >=`},
		{"to", store.FactFilter{To: 1700000000000 + 1000*1000}, []string{byTime}, `"timestamp" <=`},
		{"from and to", store.FactFilter{From: 1700000000000 + 5000*1000, To: 1700000000000 + 6000*1000}, []string{byTime}, `"timestamp" >=`},
		{"type and time", store.FactFilter{Type: "webhook", Subtype: "sent", From: 1700000000000 + 5000*1000},
			[]string{byType, byTypeTime}, "type ="},
	}
	for _, tc := range filters {
		for _, after := range []int64{0, 10000} {
			t.Run(fmt.Sprintf("%s after %d", tc.name, after), func(t *testing.T) {
				f := tc.f
				f.TenantID, f.AfterPosition, f.Limit = tenant, after, 51
				sql, args := listFactsQuery(f)
				text := explain(t, s, sql, args...)
				used := false
				for _, ix := range tc.indexes {
					used = used || strings.Contains(text, " on "+ix+" ") || strings.Contains(text, " using "+ix+" ")
				}
				cond := false
				for _, line := range strings.Split(text, "\n") {
					if strings.Contains(line, "Index Cond:") && strings.Contains(line, "tenant_id =") && strings.Contains(line, tc.cond) {
						cond = true
					}
				}
				if strings.Contains(text, "Seq Scan") || !used || !cond {
					t.Fatalf("plan does not read through %v with %q in its index condition:\n%s", tc.indexes, tc.cond, text)
				}
			})
		}
	}
}

// TestAppendRewritesEntityRowsInPlace: an append's entity update (version,
// fact_seq, state) leaves the row on its page, so it is a HOT update that
// writes none of the entities' indexes, even for rows stored densely by a
// bulk of creates.
func TestAppendRewritesEntityRowsInPlace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	const n = 300
	var items []store.Append
	for i := range n {
		id := fmt.Sprintf("acct-%04d", i)
		e := &store.Entity{TenantID: "tnt_a", ID: id, Type: "account", Version: 1,
			Data: []byte(`{"name":"Account ` + id + `","status":"active"}`), CreatedAt: 1, UpdatedAt: 1}
		if err := s.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
		items = append(items, store.Append{
			Fact:  store.Fact{ID: "fct_" + id, TenantID: "tnt_a", EntityID: id, Type: "deposit", Timestamp: 2, Data: []byte(`{"amount":"1.25"}`), CreatedAt: 2},
			State: []byte(`{"balance":"1.25","currency":"USD","facts":1}`),
		})
	}
	pages := func() map[string]string {
		rows, err := s.pool.Query(ctx, `SELECT id, (ctid::text::point)[0]::text FROM entities`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var id, page string
			if err := rows.Scan(&id, &page); err != nil {
				t.Fatal(err)
			}
			out[id] = page
		}
		return out
	}
	before := pages()
	// One transaction per append, as writers spread over many entities
	// commit them, to every fifth entity: the room a page keeps must hold
	// the new versions of the rows updated on it before it is pruned (when
	// no older transaction still sees the old ones).
	for i, it := range items {
		if i%5 != 0 {
			continue
		}
		res, err := s.AppendFacts(ctx, []store.Append{it})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
	moved := 0
	for id, page := range pages() {
		if before[id] != page {
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("%d of %d entity rows left their page when their fact was appended (updates that write every index)", moved, n/5)
	}
}
