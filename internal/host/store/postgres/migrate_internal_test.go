package postgres

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/testutil"
)

// TestOpenUpToDateDatabaseSkipsMigrationLock: a database that has every
// migration opens without waiting for the migration lock, which another
// process holds here for the whole test.
func TestOpenUpToDateDatabaseSkipsMigrationLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testutil.Postgres(t)
	quiet := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := Open(ctx, url, quiet)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLockKey); err != nil {
		t.Fatal(err)
	}
	openCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err = Open(openCtx, url, quiet)
	if err != nil {
		t.Fatalf("Open of an up-to-date database while the migration lock is held: %v", err)
	}
	s.Close()
}
