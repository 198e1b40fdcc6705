package app

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/host/store/sqlite"
)

// MigrationStatus lists the binary's migrations of the configured store,
// each applied or pending, without changing the database.
func MigrationStatus(ctx context.Context, cfg Config) ([]store.MigrationStatus, error) {
	cfg.defaults()
	if cfg.DatabaseURL != "" {
		return postgres.MigrationStatus(ctx, cfg.DatabaseURL)
	}
	return sqlite.MigrationStatus(ctx, filepath.Join(cfg.DataDir, EmbeddedStoreFile))
}

// Migrate applies the pending migrations of the configured store, as
// serve does at start unless told not to, and returns the names of those
// it applied: none that another process applied meanwhile.
func Migrate(ctx context.Context, cfg Config) ([]string, error) {
	cfg.SkipMigrations = false
	var applied []string
	st, err := openStore(ctx, cfg, func(m store.Migration) { applied = append(applied, m.Name) })
	if err != nil {
		return applied, err
	}
	if err := st.Close(); err != nil {
		return applied, fmt.Errorf("close store: %w", err)
	}
	return applied, nil
}

// EmbeddedStoreFile is the embedded store's file in the data dir.
const EmbeddedStoreFile = "factline.db"
