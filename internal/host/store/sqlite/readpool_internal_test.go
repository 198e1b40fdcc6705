package sqlite

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

func openQuiet(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "r.db"), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestReadsKeepTheirStatements: a read compiles its text once; later reads
// of the same text run the kept statement, whatever their arguments.
func TestReadsKeepTheirStatements(t *testing.T) {
	s := openQuiet(t)
	ctx := t.Context()
	if err := s.CreateEntity(ctx, &store.Entity{TenantID: "t1", ID: "e1", Type: "contact"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEntity(ctx, "t1", "e1"); err != nil {
		t.Fatal(err)
	}
	kept := s.r.kept()
	if kept == 0 {
		t.Fatal("a read kept no statement")
	}
	first := s.r.stmts[`SELECT `+entityColumns+` FROM entities WHERE tenant_id = ? AND id = ?`]
	if first == nil {
		t.Fatal("the entity read's statement is not kept under its text")
	}
	for i := range 20 {
		if _, err := s.GetEntity(ctx, "t1", fmt.Sprintf("missing-%d", i)); err == nil {
			t.Fatal("a missing entity was found")
		}
		if _, err := s.GetEntity(ctx, "t1", "e1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.r.kept(); got != kept {
		t.Errorf("after 40 more reads of one text the pool keeps %d statements, want %d", got, kept)
	}
	if again := s.r.stmts[`SELECT `+entityColumns+` FROM entities WHERE tenant_id = ? AND id = ?`]; again != first {
		t.Error("the entity read was compiled again")
	}
}

// TestReadStatementsStartOverAtTheBound: many distinct texts never keep
// more than maxReadStatements, and a statement dropped while a call is
// about to run it still runs, then is closed.
func TestReadStatementsStartOverAtTheBound(t *testing.T) {
	s := openQuiet(t)
	ctx := t.Context()
	held, err := s.r.acquire(ctx, `SELECT 1`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxReadStatements + 10 {
		var n int
		if err := s.r.QueryRowContext(ctx, fmt.Sprintf("SELECT %d", i+2)).Scan(&n); err != nil || n != i+2 {
			t.Fatalf("SELECT %d: %d, %v", i+2, n, err)
		}
		if k := s.r.kept(); k > maxReadStatements {
			t.Fatalf("the pool keeps %d statements, more than %d", k, maxReadStatements)
		}
	}
	if !held.dropped {
		t.Fatal("the held statement was not dropped when the pool started over")
	}
	var one int
	if err := held.stmt.QueryRowContext(ctx).Scan(&one); err != nil || one != 1 {
		t.Fatalf("a dropped statement still in use: %d, %v", one, err)
	}
	s.r.release(held)
	if err := held.stmt.QueryRowContext(ctx).Scan(&one); err == nil {
		t.Error("a dropped statement was not closed when its last user released it")
	}
}

// TestConcurrentReadsWhileStatementsAreDropped: readers of shared and
// distinct texts run while the pool starts over again and again; every
// read answers.
func TestConcurrentReadsWhileStatementsAreDropped(t *testing.T) {
	s := openQuiet(t)
	ctx := context.WithoutCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				want := i % 3
				if g%2 == 1 {
					want = g*1000 + i // distinct texts: the pool fills and starts over
				}
				rows, err := s.r.QueryContext(ctx, fmt.Sprintf("SELECT %d", want))
				if err != nil {
					errs <- err
					return
				}
				var got int
				for rows.Next() {
					if err := rows.Scan(&got); err != nil {
						errs <- err
					}
				}
				if err := rows.Close(); err != nil {
					errs <- err
					return
				}
				if got != want {
					errs <- fmt.Errorf("SELECT %d answered %d", want, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
