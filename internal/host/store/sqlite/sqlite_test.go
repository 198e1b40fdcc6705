package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/sqlite"
	"github.com/factline/factline/internal/host/store/storetest"
	"github.com/factline/factline/internal/teststore"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, hooks store.Hooks) store.Store {
		// A copy of a database migrated once: Open applies nothing.
		s, err := sqlite.Open(t.Context(), teststore.SQLite(t), sqlite.Options{Hooks: hooks, Logger: quietLogger()})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nested", "dir", "factline.db")

	s, err := sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	e := &store.Entity{TenantID: "tnt_a", ID: "ent_1", Type: "account", Data: json.RawMessage(`{"name":"kept"}`), CreatedAt: 1, UpdatedAt: 1}
	if err := s.CreateEntity(ctx, e); err != nil {
		t.Fatalf("CreateEntity: %v", err)
	}
	res, err := s.AppendFacts(ctx, []store.Append{
		{Fact: store.Fact{ID: "fct_1", TenantID: "tnt_a", EntityID: "ent_1", Type: "deposit", Data: json.RawMessage(`{"n":1}`)}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("AppendFacts: %v %v", err, res)
	}
	if err := s.SetCheckpoint(ctx, "c", 1); err != nil {
		t.Fatalf("SetCheckpoint: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = sqlite.Open(ctx, path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	got, err := s.GetEntity(ctx, "tnt_a", "ent_1")
	if err != nil {
		t.Fatalf("GetEntity after reopen: %v", err)
	}
	if got.Version != 2 || string(got.Data) != `{"name":"kept"}` {
		t.Errorf("entity after reopen: %+v", got)
	}
	if f, err := s.GetFact(ctx, "tnt_a", "fct_1"); err != nil || f.Position != 1 || f.Seq != 1 {
		t.Errorf("fact after reopen: %+v, %v", f, err)
	}
	if p, err := s.GetCheckpoint(ctx, "c"); err != nil || p != 1 {
		t.Errorf("checkpoint after reopen: %d, %v", p, err)
	}
	// The position counter carries on from where it was.
	res, err = s.AppendFacts(ctx, []store.Append{{Fact: store.Fact{ID: "fct_2", TenantID: "tnt_a", EntityID: "ent_1", Type: "deposit"}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("AppendFacts after reopen: %v %v", err, res)
	}
	if res[0].Fact.Position != 2 || res[0].Fact.Seq != 2 {
		t.Errorf("fact after reopen: position %d seq %d, want 2 and 2", res[0].Fact.Position, res[0].Fact.Seq)
	}

	// Migrations were recorded once, and the file is in WAL mode.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, version int64
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &version); err != nil {
		t.Fatalf("schema_migrations: %v", err)
	}
	if n != version || version < 1 {
		t.Errorf("schema_migrations: %d rows, max version %d", n, version)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode: %q, %v", mode, err)
	}
}

func TestOpenRejectsNonFilePaths(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if s, err := sqlite.Open(context.Background(), path, sqlite.Options{}); err == nil {
			s.Close()
			t.Errorf("Open(%q): got nil error", path)
		}
	}
}
