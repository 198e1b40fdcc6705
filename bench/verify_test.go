//go:build bench

package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ledgerCheck is what verifyLedgers found in one database.
type ledgerCheck struct {
	HotFacts   int64 // facts of the hot entity
	TotalFacts int64 // facts in the database
	HeadPos    int64 // fact_head.position
	Problems   []string
	Err        error // the check itself could not run
}

// OK reports whether the check ran and found nothing wrong.
func (c *ledgerCheck) OK() bool { return c.Err == nil && len(c.Problems) == 0 }

// verifyLedgers checks the invariants of the fact log after the clients
// have stopped: the hot entity's facts have seq exactly 1..N with N the
// number of appends its clients saw succeed; every entity's seq runs 1..n
// and its row agrees (version 1+n, fact_seq n); global positions are
// exactly 1..M with M the number of successful appends and fact_head at M.
func verifyLedgers(ctx context.Context, pool *pgxpool.Pool, hot string, wantHot, wantTotal int64) *ledgerCheck {
	c := &ledgerCheck{}
	fail := func(format string, args ...any) { c.Problems = append(c.Problems, fmt.Sprintf(format, args...)) }

	// The hot entity's ledger, seq by seq.
	rows, err := pool.Query(ctx, `SELECT seq FROM facts WHERE tenant_id = $1 AND entity_id = $2 ORDER BY seq`, benchTenant, hot)
	if err != nil {
		c.Err = fmt.Errorf("read hot ledger: %w", err)
		return c
	}
	var (
		want            int64 = 1
		gaps, dups, bad int64
		firstBad        string
	)
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			rows.Close()
			c.Err = fmt.Errorf("read hot ledger: %w", err)
			return c
		}
		c.HotFacts++
		switch {
		case seq == want:
			want++
			continue
		case seq == want-1:
			dups++
		case seq > want:
			gaps += seq - want
			want = seq + 1
		default:
			bad++
		}
		if firstBad == "" {
			firstBad = fmt.Sprintf("fact #%d has seq %d", c.HotFacts, seq)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		c.Err = fmt.Errorf("read hot ledger: %w", err)
		return c
	}
	if gaps+dups+bad > 0 {
		fail("hot entity %s: seq is not 1..N: %d missing, %d duplicated, %d out of order (first: %s)", hot, gaps, dups, bad, firstBad)
	}
	if c.HotFacts != wantHot {
		fail("hot entity %s holds %d facts; its clients saw %d appends succeed", hot, c.HotFacts, wantHot)
	}
	var version, factSeq int64
	if err := pool.QueryRow(ctx, `SELECT version, fact_seq FROM entities WHERE tenant_id = $1 AND id = $2`, benchTenant, hot).
		Scan(&version, &factSeq); err != nil {
		c.Err = fmt.Errorf("read hot entity: %w", err)
		return c
	}
	if version != c.HotFacts+1 || factSeq != c.HotFacts {
		fail("hot entity %s: version %d and fact_seq %d after %d facts (want %d and %d)", hot, version, factSeq, c.HotFacts, c.HotFacts+1, c.HotFacts)
	}

	// Every entity's ledger, in aggregate.
	var badLedgers, badRows int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (
    SELECT 1 FROM facts WHERE entity_id IS NOT NULL GROUP BY tenant_id, entity_id
    HAVING min(seq) <> 1 OR max(seq) <> count(*) OR count(DISTINCT seq) <> count(*)) x`).Scan(&badLedgers); err != nil {
		c.Err = fmt.Errorf("check ledgers: %w", err)
		return c
	}
	if badLedgers > 0 {
		fail("%d entities have a seq that is not 1..n", badLedgers)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM entities e
    LEFT JOIN (SELECT tenant_id, entity_id, count(*) AS n FROM facts GROUP BY tenant_id, entity_id) f
      ON f.tenant_id = e.tenant_id AND f.entity_id = e.id
    WHERE e.fact_seq <> COALESCE(f.n, 0) OR e.version <> 1 + COALESCE(f.n, 0)`).Scan(&badRows); err != nil {
		c.Err = fmt.Errorf("check entity rows: %w", err)
		return c
	}
	if badRows > 0 {
		fail("%d entity rows disagree with their ledgers (version or fact_seq)", badRows)
	}

	// Global positions.
	var minPos, maxPos int64
	if err := pool.QueryRow(ctx, `SELECT count(*), COALESCE(min(position), 0), COALESCE(max(position), 0) FROM facts`).
		Scan(&c.TotalFacts, &minPos, &maxPos); err != nil {
		c.Err = fmt.Errorf("check positions: %w", err)
		return c
	}
	if err := pool.QueryRow(ctx, `SELECT position FROM fact_head`).Scan(&c.HeadPos); err != nil {
		c.Err = fmt.Errorf("read fact_head: %w", err)
		return c
	}
	// position is the primary key, so count = max and min = 1 means
	// exactly 1..M.
	if c.TotalFacts > 0 && (minPos != 1 || maxPos != c.TotalFacts) {
		fail("global positions are not 1..M: %d facts span positions %d..%d", c.TotalFacts, minPos, maxPos)
	}
	if c.HeadPos != maxPos {
		fail("fact_head is at %d but the highest position is %d", c.HeadPos, maxPos)
	}
	if c.TotalFacts != wantTotal {
		fail("the database holds %d facts; the clients saw %d appends succeed", c.TotalFacts, wantTotal)
	}
	return c
}
