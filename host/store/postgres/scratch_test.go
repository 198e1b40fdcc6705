package postgres_test

import (
	"context"
	"fmt"
	"os"
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
	_ = 0
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 64 {
		s.CreateEntity(ctx, &store.Entity{TenantID: "tnt_a", ID: fmt.Sprintf("ent_%03d", i), Type: "account", Data: []byte(`{}`), CreatedAt: 1, UpdatedAt: 1})
	}
	if os.Getenv("NOFK") != "" {
		if _, err := conn.Exec(ctx, "ALTER TABLE facts DROP CONSTRAINT facts_tenant_id_entity_id_fkey"); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for round := range 200 {
		items := make([]store.Append, 128)
		for i := range items {
			n++
			items[i] = store.Append{Fact: fact("tnt_a", fmt.Sprintf("ent_%03d", n%64), fmt.Sprintf("fct_%09d", n))}
		}
		st := time.Now()
		if _, err := s.AppendFacts(ctx, items); err != nil {
			t.Fatal(err)
		}
		if round > 190 {
			t.Logf("append: %v", time.Since(st))
		}
	}
	ids := make([]string, 128)
	for i := range ids {
		ids[i] = fmt.Sprintf("fct_%09d", 20000+i)
	}
	for _, q := range []string{
		"EXPLAIN ANALYZE SELECT id FROM facts WHERE id = ANY($1::text[])",
		"EXPLAIN ANALYZE SELECT f.id FROM unnest($1::text[]) AS k(id) JOIN facts f ON f.id = k.id",
		"EXPLAIN ANALYZE SELECT id FROM facts WHERE id = ANY($1::text[])",
		"EXPLAIN ANALYZE SELECT f.id FROM unnest($1::text[]) AS k(id) JOIN facts f ON f.id = k.id",
	} {
		rows, err := conn.Query(ctx, q, ids)
		if err != nil {
			t.Log(err)
			continue
		}
		for rows.Next() {
			var line string
			rows.Scan(&line)
			t.Log(line)
		}
	}
}
