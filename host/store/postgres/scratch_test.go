package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/host/store"
	"github.com/factline/factline/host/store/postgres"
	"github.com/factline/factline/internal/testutil"
)

func TestScratchTiming(t *testing.T) {
	url := testutil.Postgres(t)
	ctx := context.Background()
	conn, _ := pgx.Connect(ctx, url)
	conn.Exec(ctx, "ALTER DATABASE "+conn.Config().Database+" SET log_min_duration_statement = 0")
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 64 {
		s.CreateEntity(ctx, &store.Entity{TenantID: "tnt_a", ID: fmt.Sprintf("ent_%03d", i), Type: "account", Data: []byte(`{}`), CreatedAt: 1, UpdatedAt: 1})
	}
	n := 0
	for round := range 30 {
		items := make([]store.Append, 16)
		for i := range items {
			n++
			items[i] = store.Append{Fact: fact("tnt_a", fmt.Sprintf("ent_%03d", n%64), fmt.Sprintf("fct_%09d", n))}
		}
		st := time.Now()
		if _, err := s.AppendFacts(ctx, items); err != nil {
			t.Fatal(err)
		}
		if round > 25 {
			t.Logf("append: %v", time.Since(st))
		}
	}
	var out string
	rows, _ := conn.Query(ctx, "SELECT pg_read_file(pg_current_logfile())")
	_ = rows
	_ = out
	st := time.Now()
	var x int
	for range 100 {
		conn.QueryRow(ctx, "SELECT 1").Scan(&x)
	}
	t.Logf("select 1: %v", time.Since(st)/100)
	time.Sleep(time.Hour)
}
