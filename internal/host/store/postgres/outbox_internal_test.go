package postgres

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/testutil"
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

// TestClaimOutboxPlansTheClaimOnlyWhenARowIsDue: a claim on an outbox with
// no due row stops after anyDue, so the claim statement is never
// prepared (planned) on the store's only connection; once a row is due it
// is, and the row is claimed.
func TestClaimOutboxPlansTheClaimOnlyWhenARowIsDue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, testutil.Postgres(t), Options{MaxConns: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	claimPrepared := func() bool {
		t.Helper()
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'WITH due AS%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	const now = 1700000000000
	req := store.ClaimRequest{Now: now, Token: "tok-1", Limit: 10, LeaseFactorMS: 1000}
	if got, err := s.ClaimOutbox(ctx, req); err != nil || len(got) != 0 {
		t.Fatalf("empty outbox: %d claims, %v", len(got), err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO webhook_outbox (delivery_id, tenant_id, triggered_fact_id, config_id, config_version,
	endpoint, status, attempt, max_attempts, timeout_seconds, sig_timestamp, payload, next_attempt_at, created_at, updated_at)
VALUES ('del_1', 'tnt_1', 'fct_1', 'cfg_1', 1, 'https://example.test/', 'pending', 1, 3, 10, 1700000000, '{}', $1, $1, $1)`, now+1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimOutbox(ctx, req); err != nil || len(got) != 0 {
		t.Fatalf("a row due later: %d claims, %v", len(got), err)
	}
	if claimPrepared() {
		t.Fatal("the claim statement was planned with no row due")
	}
	req.Now, req.Token = now+1, "tok-2"
	got, err := s.ClaimOutbox(ctx, req)
	if err != nil || len(got) != 1 || got[0].DeliveryID != "del_1" {
		t.Fatalf("a due row: %+v, %v", got, err)
	}
	if !claimPrepared() {
		t.Error("the claim statement was not run for a due row")
	}
}
