package auth_test

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/store/sqlite"
)

// A key revoked by another process (straight in the store, so this
// process's cache is not told) still passes Authenticate from the cache,
// and fails Recheck at once.
func TestRecheckSeesRevocationByAnotherProcess(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "f.db"), sqlite.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, rec, err := auth.CreateKey(ctx, st, "acme", auth.ModeAdmin, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a := auth.NewAuthenticator(st)
	if _, err := a.Authenticate(ctx, key); err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if err := st.RevokeAPIKey(ctx, rec.ID, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, key); err != nil {
		t.Fatalf("Authenticate from the cache: %v", err)
	}
	if _, err := a.Recheck(ctx, key); !errors.Is(err, auth.ErrInvalidKey) {
		t.Fatalf("Recheck of a revoked key = %v, want ErrInvalidKey", err)
	}
	if _, err := a.Authenticate(ctx, key); !errors.Is(err, auth.ErrInvalidKey) {
		t.Fatalf("Authenticate after Recheck = %v, want ErrInvalidKey", err)
	}
}
