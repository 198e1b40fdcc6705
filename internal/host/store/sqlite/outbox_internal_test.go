package sqlite

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestListOutboxByTenantUsesAnIndex: listing one tenant's deliveries
// searches an index by tenant, never a scan of the whole outbox.
func TestListOutboxByTenantUsesAnIndex(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "f.db"), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.w.ExecContext(ctx, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 5000)
INSERT INTO webhook_outbox (delivery_id, tenant_id, triggered_fact_id, config_id, config_version,
	endpoint, status, attempt, max_attempts, timeout_seconds, sig_timestamp, payload, next_attempt_at, created_at, updated_at)
SELECT printf('del_%06d', n), 'tnt_' || (n % 200), 'fct_' || n, 'cfg_' || (n % 7), 1,
	'https://example.test/', CASE n % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'sent' ELSE 'dead' END, 1, 3, 10, 1700000000, '{}',
	1700000000000 + n, 1700000000000 + n * 1000, 1700000000000 + n * 1000 FROM g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{"", "sent"} {
		rows, err := s.r.QueryContext(ctx, `EXPLAIN QUERY PLAN `+listOutboxQuery, "tnt_7", status, "", "", 51, int64(0), int64(0))
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "USING INDEX webhook_outbox_tenant (tenant_id=?") {
			t.Errorf("status %q: plan does not search webhook_outbox_tenant by tenant:\n%s", status, text)
		}
	}
}
