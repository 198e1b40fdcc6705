package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/factline/factline/internal/host/store"
)

const configColumns = `tenant_id, id, version, type, name, scope_type, scope_id, settings, status, superseded_at, effective_at, created_at`

func scanConfig(row rowScanner) (*store.Config, error) {
	var (
		c                        store.Config
		name, scopeType, scopeID sql.NullString
		settings                 string
		supersededAt             sql.NullInt64
	)
	err := row.Scan(&c.TenantID, &c.ID, &c.Version, &c.Type, &name, &scopeType, &scopeID,
		&settings, &c.Status, &supersededAt, &c.EffectiveAt, &c.CreatedAt)
	if err != nil {
		return nil, err
	}
	c.Name, c.ScopeType, c.ScopeID = name.String, scopeType.String, scopeID.String
	c.Settings = []byte(settings)
	c.SupersededAt = intPtr(supersededAt)
	return &c, nil
}

func insertConfig(ctx context.Context, tx *sql.Tx, c *store.Config) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO configs (`+configColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`,
		c.TenantID, c.ID, c.Version, c.Type, nullString(c.Name), nullString(c.ScopeType), nullString(c.ScopeID),
		objectOrEmpty(c.Settings), c.Status, c.EffectiveAt, c.CreatedAt)
	return interpretError(err)
}

// CreateConfig inserts version 1 of a config.
func (s *Store) CreateConfig(ctx context.Context, c *store.Config) error {
	if err := c.PrepareVersion(); err != nil {
		return fmt.Errorf("sqlite: create config: %w", err)
	}
	c.Version = 1
	err := s.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM configs WHERE tenant_id = ? AND id = ? LIMIT 1`, c.TenantID, c.ID).Scan(&one)
		if err == nil {
			return store.ErrAlreadyExists
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return insertConfig(ctx, tx, c)
	})
	if err != nil {
		return fmt.Errorf("sqlite: create config %s: %w", c.ID, err)
	}
	return nil
}

const latestConfig = `SELECT ` + configColumns + ` FROM configs WHERE tenant_id = ? AND id = ? AND superseded_at IS NULL`

// GetConfig returns the latest version.
func (s *Store) GetConfig(ctx context.Context, tenantID, id string) (*store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("sqlite: get config: %w", err)
	}
	c, err := scanConfig(s.r.QueryRowContext(ctx, latestConfig, tenantID, id))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get config %s: %w", id, interpretError(err))
	}
	return c, nil
}

// GetConfigVersion returns one version.
func (s *Store) GetConfigVersion(ctx context.Context, tenantID, id string, version int64) (*store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("sqlite: get config version: %w", err)
	}
	row := s.r.QueryRowContext(ctx, `SELECT `+configColumns+` FROM configs WHERE tenant_id = ? AND id = ? AND version = ?`,
		tenantID, id, version)
	c, err := scanConfig(row)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get config %s version %d: %w", id, version, interpretError(err))
	}
	return c, nil
}

// ListConfigVersions returns every version ascending.
func (s *Store) ListConfigVersions(ctx context.Context, tenantID, id string) ([]store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("sqlite: list config versions: %w", err)
	}
	out, err := s.queryConfigs(ctx, `SELECT `+configColumns+` FROM configs WHERE tenant_id = ? AND id = ? ORDER BY version`,
		tenantID, id)
	if err == nil && len(out) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: list config versions %s: %w", id, err)
	}
	return out, nil
}

// PutConfigVersion inserts the next version and supersedes the previous one.
func (s *Store) PutConfigVersion(ctx context.Context, c *store.Config) error {
	if err := c.PrepareVersion(); err != nil {
		return fmt.Errorf("sqlite: put config version: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		latest, err := scanConfig(tx.QueryRowContext(ctx, latestConfig, c.TenantID, c.ID))
		if err != nil {
			return interpretError(err)
		}
		if latest.Status == store.ConfigArchived {
			return store.ErrArchived
		}
		if c.Version != latest.Version+1 {
			return fmt.Errorf("latest version is %d, got %d: %w", latest.Version, c.Version, store.ErrVersionConflict)
		}
		_, err = tx.ExecContext(ctx, `UPDATE configs SET superseded_at = ? WHERE tenant_id = ? AND id = ? AND version = ?`,
			c.CreatedAt, c.TenantID, c.ID, latest.Version)
		if err != nil {
			return err
		}
		return insertConfig(ctx, tx, c)
	})
	if err != nil {
		return fmt.Errorf("sqlite: put config %s version %d: %w", c.ID, c.Version, err)
	}
	return nil
}

// ArchiveConfig marks the latest version archived.
func (s *Store) ArchiveConfig(ctx context.Context, tenantID, id string, now int64) (*store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("sqlite: archive config: %w", err)
	}
	var out *store.Config
	err := s.write(ctx, func(tx *sql.Tx) error {
		c, err := scanConfig(tx.QueryRowContext(ctx, `UPDATE configs SET status = ?
WHERE tenant_id = ? AND id = ? AND superseded_at IS NULL
RETURNING `+configColumns, store.ConfigArchived, tenantID, id))
		if err != nil {
			return interpretError(err)
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: archive config %s: %w", id, err)
	}
	return out, nil
}

// ListConfigs returns the latest version of each matching config by id.
func (s *Store) ListConfigs(ctx context.Context, f store.ConfigFilter) ([]store.Config, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("sqlite: list configs: %w", err)
	}
	var q strings.Builder
	q.WriteString(`SELECT ` + configColumns + ` FROM configs WHERE tenant_id = ? AND superseded_at IS NULL`)
	args := []any{f.TenantID}
	for _, c := range f.Conds() {
		q.WriteString(` AND ` + c.SQL + ` ?`)
		args = append(args, c.Arg)
	}
	q.WriteString(` ORDER BY id LIMIT ?`)
	args = append(args, sqlLimit(f.Limit))
	out, err := s.queryConfigs(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list configs: %w", err)
	}
	return out, nil
}

// ListActiveConfigsByType returns the latest version of every active config
// of the type, across tenants, by tenant and id.
func (s *Store) ListActiveConfigsByType(ctx context.Context, typ string) ([]store.Config, error) {
	out, err := s.queryConfigs(ctx, `SELECT `+configColumns+` FROM configs
WHERE type = ? AND status = ? AND superseded_at IS NULL ORDER BY tenant_id, id`, typ, store.ConfigActive)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list active configs of type %s: %w", typ, err)
	}
	return out, nil
}

func (s *Store) queryConfigs(ctx context.Context, q string, args ...any) ([]store.Config, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Config
	for rows.Next() {
		c, err := scanConfig(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *c)
	}
	return out, rows.Err()
}
