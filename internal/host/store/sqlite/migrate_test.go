package sqlite

import (
	"context"
	"database/sql"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/factline/factline/internal/host/store"
)

func openRaw(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db")+"?"+dsnParams(false))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func versions(t *testing.T, db *sql.DB) []int64 {
	t.Helper()
	rows, err := db.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func TestMigrate(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := openRaw(t)

	v1 := fstest.MapFS{"0001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);`)}}
	if err := migrate(ctx, db, v1, logger, nil); err != nil {
		t.Fatalf("migrate v1: %v", err)
	}
	// Applying again is a no-op (the INSERT would otherwise run twice).
	if err := migrate(ctx, db, v1, logger, nil); err != nil {
		t.Fatalf("migrate v1 again: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM a`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in a: %d, %v", n, err)
	}

	// A failing migration leaves nothing behind: its first statement is
	// rolled back and its version is not recorded.
	bad := fstest.MapFS{
		"0001_a.sql":   v1["0001_a.sql"],
		"0002_bad.sql": {Data: []byte(`CREATE TABLE b (x INTEGER); INSERT INTO nope VALUES (1);`)},
	}
	if err := migrate(ctx, db, bad, logger, nil); err == nil {
		t.Fatal("migrate with a bad migration: got nil error")
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'b'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("table b after a failed migration: %d, %v", n, err)
	}
	if got := versions(t, db); len(got) != 1 || got[0] != 1 {
		t.Errorf("versions after a failed migration: %v", got)
	}

	good := fstest.MapFS{
		"0001_a.sql": v1["0001_a.sql"],
		"0002_b.sql": {Data: []byte(`CREATE TABLE b (x INTEGER);`)},
		"README.txt": {Data: []byte(`not a migration`)},
		"0003_c.sql": {Data: []byte(`ALTER TABLE b ADD COLUMN y TEXT;`)},
	}
	if err := migrate(ctx, db, good, logger, nil); err != nil {
		t.Fatalf("migrate v3: %v", err)
	}
	if got := versions(t, db); len(got) != 3 || got[2] != 3 {
		t.Errorf("versions: %v", got)
	}

	// A database newer than the binary is refused.
	if err := migrate(ctx, db, v1, logger, nil); err == nil {
		t.Error("migrate with fewer migrations than applied: got nil error")
	}
}

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no number":  {"init.sql": {}},
		"zero":       {"0000_init.sql": {}},
		"duplicate":  {"0001_a.sql": {}, "1_b.sql": {}},
		"no summary": {"0001.sql": {}},
	} {
		if _, err := store.LoadMigrations(fsys); err == nil {
			t.Errorf("%s: got nil error", name)
		}
	}
	ms, err := store.LoadMigrations(migrationFS)
	if err != nil || len(ms) == 0 || ms[0].Version != 1 {
		t.Fatalf("embedded migrations: %v, %v", ms, err)
	}
}

// TestSecretKeyRecordTakesTheOldestSecretsKey: a database that holds
// webhook secrets from before the key record (migration 5) records the key
// of its oldest secret, which later secrets must then use.
func TestSecretKeyRecordTakesTheOldestSecretsKey(t *testing.T) {
	ctx := t.Context()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := openRaw(t)
	before := fstest.MapFS{}
	names, err := fs.Glob(migrationFS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name < "0005" {
			b, err := fs.ReadFile(migrationFS, name)
			if err != nil {
				t.Fatal(err)
			}
			before[name] = &fstest.MapFile{Data: b}
		}
	}
	if err := migrate(ctx, db, before, logger, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO webhook_secrets (tenant_id, ref, ciphertext, key_id, created_at) VALUES
('t2', 'webhook_secret_b', x'01', 'k_new', 200), ('t1', 'webhook_secret_a', x'01', 'k_old', 100)`); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, db, migrationFS, logger, nil); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := db.QueryRowContext(ctx, `SELECT key_id FROM webhook_secret_key`).Scan(&id); err != nil || id != "k_old" {
		t.Fatalf("recorded key %q, %v; want k_old", id, err)
	}
}
