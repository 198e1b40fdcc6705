package postgres

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/factline/factline/internal/testutil"
)

// openInternal opens a store on a database of the test's own, closed when
// the test ends.
func openInternal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), testutil.Postgres(t), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// explain returns the plan PostgreSQL chooses for query with args.
func explain(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `EXPLAIN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
