package sqlite

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
)

// TestTxStmtsPrepareOncePerTransaction: an append transaction compiles
// each of its statements once, whatever the number of items.
func TestTxStmtsPrepareOncePerTransaction(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "f.db"), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.write(ctx, func(tx *sql.Tx) error {
		st := newTxStmts(tx)
		defer st.close()
		for i := range 3 {
			var n int
			if err := st.queryRow(ctx, appendIDTaken, "fact-"+string(rune('a'+i))).Scan(&n); err != nil {
				return err
			}
			if n != 0 {
				t.Errorf("fact id taken in an empty store")
			}
		}
		first, err := st.get(ctx, appendIDTaken)
		if err != nil {
			return err
		}
		again, err := st.get(ctx, appendIDTaken)
		if err != nil {
			return err
		}
		if len(st.stmts) != 1 || first != again {
			t.Errorf("%d statements prepared for one query, want 1", len(st.stmts))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
