//go:build bench && scratch

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/host/id"
	"github.com/factline/factline/host/store"
	"github.com/factline/factline/host/store/postgres"
	"github.com/factline/factline/internal/testutil"
)

func TestScratchCommitFloor(t *testing.T) {
	ctx := context.Background()
	url := testutil.PostgresDurable(t)
	st, err := postgres.Open(ctx, url, postgres.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range manyEntities {
		e := &store.Entity{TenantID: benchTenant, ID: accountID(i), Type: "account", Data: json.RawMessage(`{}`), CreatedAt: 1, UpdatedAt: 1}
		if err := st.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	med := func(f func()) (time.Duration, time.Duration) {
		var l []time.Duration
		for range 300 {
			t0 := time.Now()
			f()
			l = append(l, time.Since(t0))
		}
		slices.Sort(l)
		return l[len(l)/2], l[len(l)*99/100]
	}
	p50, p99 := med(func() { conn.Exec(ctx, "SELECT 1") })
	fmt.Printf("round trip SELECT 1: p50 %v p99 %v\n", p50, p99)
	p50, p99 = med(func() {
		tx, _ := conn.Begin(ctx)
		tx.Exec(ctx, "UPDATE checkpoints SET position = 0 WHERE consumer = 'x'")
		tx.Exec(ctx, "INSERT INTO checkpoints VALUES ('y', 1, 1) ON CONFLICT (consumer) DO UPDATE SET position = checkpoints.position + 1")
		tx.Commit(ctx)
	})
	fmt.Printf("BEGIN; write; COMMIT (fsync): p50 %v p99 %v\n", p50, p99)
	k := 0
	for _, n := range []int{1, 8, 32, 64} {
		p50, p99 = med(func() {
			items := make([]store.Append, n)
			for i := range items {
				items[i] = store.Append{Fact: store.Fact{ID: id.New(id.Fact), TenantID: benchTenant, EntityID: accountID(k % manyEntities),
					Type: "deposit", Timestamp: 1, Data: json.RawMessage(`{"amount":1.25}`), CreatedAt: 1}}
				k++
			}
			res, err := st.AppendFacts(ctx, items)
			if err != nil || res[0].Err != nil {
				t.Fatal(err, res[0].Err)
			}
		})
		fmt.Printf("AppendFacts batch %d (serial, idle machine): p50 %v p99 %v => %.0f facts/s at p50\n", n, p50, p99, float64(n)/p50.Seconds())
	}
}
