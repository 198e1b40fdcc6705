package app_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/teststore"
)

// TestOpenStorePoolSize: DatabaseMaxConns reaches the Postgres pool.
func TestOpenStorePoolSize(t *testing.T) {
	t.Parallel()
	st, err := app.OpenStore(t.Context(), app.Config{DatabaseURL: teststore.Postgres(t), DatabaseMaxConns: 3,
		DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pg, ok := st.(*postgres.Store)
	if !ok {
		t.Fatalf("store %T", st)
	}
	if got := pg.MaxConns(); got != 3 {
		t.Errorf("pool of %d connections, want 3", got)
	}
}
