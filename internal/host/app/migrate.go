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
	return sqlite.MigrationStatus(ctx, filepath.Join(cfg.DataDir, "factline.db"))
}

// Migrate applies the pending migrations of the configured store, as
// serve does at start unless told not to.
func Migrate(ctx context.Context, cfg Config) error {
	cfg.SkipMigrations = false
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}
