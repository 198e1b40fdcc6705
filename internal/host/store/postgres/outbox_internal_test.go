package postgres

import (
	"strings"
	"testing"
)

// TestListOutboxByTenantUsesAnIndex: on an outbox of many tenants, listing
// one tenant's deliveries (any status, first and later pages) reads
// through an index whose condition names the tenant, never a Seq Scan or
// a walk of the primary key filtering every tenant's rows.
func TestListOutboxByTenantUsesAnIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_outbox (delivery_id, tenant_id, triggered_fact_id, config_id, config_version,
	endpoint, status, attempt, max_attempts, timeout_seconds, sig_timestamp, payload, next_attempt_at, created_at, updated_at)
SELECT 'del_' || lpad(g::text, 6, '0'), 'tnt_' || (g % 200), 'fct_' || g, 'cfg_' || (g % 7), 1,
	'https://example.test/', (ARRAY['pending', 'sent', 'dead'])[1 + g % 3], 1, 3, 10, 1700000000, '{}',
	1700000000000 + g, 1700000000000 + g * 1000, 1700000000000 + g * 1000
FROM generate_series(1, 20000) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE webhook_outbox`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		status, after string
		from          int64
	}{
		{"any status", "", "", 0},
		{"any status, later page", "", "del_010000", 0},
		{"sent", "sent", "", 0},
		{"from a time", "", "", 1700000000000 + 15000*1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := explain(t, s, listOutboxQuery, "tnt_7", tc.status, "", tc.after, 51, tc.from, int64(0))
			if strings.Contains(text, "Seq Scan") || !strings.Contains(text, "webhook_outbox_tenant") ||
				!strings.Contains(text, "Index Cond: ((tenant_id = ") {
				t.Fatalf("plan does not read through webhook_outbox_tenant by tenant:\n%s", text)
			}
		})
	}
}
