package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
)

const configColumns = `tenant_id, id, version, type, COALESCE(name, ''), COALESCE(scope_type, ''), COALESCE(scope_id, ''),
settings, status, superseded_at, effective_at, created_at`

func scanConfig(row pgx.Row) (*store.Config, error) {
	var (
		c        store.Config
		settings []byte
	)
	err := row.Scan(&c.TenantID, &c.ID, &c.Version, &c.Type, &c.Name, &c.ScopeType, &c.ScopeID,
		&settings, &c.Status, &c.SupersededAt, &c.EffectiveAt, &c.CreatedAt)
	if err != nil {
		return nil, err
	}
	c.Settings = settings
	return &c, nil
}

const insertConfig = `INSERT INTO configs (tenant_id, id, version, type, name, scope_type, scope_id, settings, status,
	superseded_at, effective_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, NULL, $10, $11)`

func insertConfigArgs(c *store.Config) []any {
	return []any{c.TenantID, c.ID, c.Version, c.Type, nullString(c.Name), nullString(c.ScopeType),
		nullString(c.ScopeID), objectOrEmpty(c.Settings), c.Status, c.EffectiveAt, c.CreatedAt}
}

// CreateConfig inserts version 1 of a config. Every config has a version
// 1, so the primary key rejects a taken id.
func (s *Store) CreateConfig(ctx context.Context, c *store.Config) error {
	if err := c.PrepareVersion(); err != nil {
		return fmt.Errorf("postgres: create config: %w", err)
	}
	c.Version = 1
	if _, err := s.pool.Exec(ctx, insertConfig, insertConfigArgs(c)...); err != nil {
		return fmt.Errorf("postgres: create config %s: %w", c.ID, inDoubt(interpretError(err)))
	}
	return nil
}

const latestConfig = `SELECT ` + configColumns + ` FROM configs WHERE tenant_id = $1 AND id = $2 AND superseded_at IS NULL`

// GetConfig returns the latest version.
func (s *Store) GetConfig(ctx context.Context, tenantID, id string) (*store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("postgres: get config: %w", err)
	}
	c, err := scanConfig(s.pool.QueryRow(ctx, latestConfig, tenantID, id))
	if err != nil {
		return nil, fmt.Errorf("postgres: get config %s: %w", id, interpretError(err))
	}
	return c, nil
}

// GetConfigVersion returns one version.
func (s *Store) GetConfigVersion(ctx context.Context, tenantID, id string, version int64) (*store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("postgres: get config version: %w", err)
	}
	row := s.pool.QueryRow(ctx, `SELECT `+configColumns+` FROM configs WHERE tenant_id = $1 AND id = $2 AND version = $3`,
		tenantID, id, version)
	c, err := scanConfig(row)
	if err != nil {
		return nil, fmt.Errorf("postgres: get config %s version %d: %w", id, version, interpretError(err))
	}
	return c, nil
}

// ListConfigVersions returns every version ascending.
func (s *Store) ListConfigVersions(ctx context.Context, tenantID, id string) ([]store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("postgres: list config versions: %w", err)
	}
	out, err := s.queryConfigs(ctx, `SELECT `+configColumns+` FROM configs WHERE tenant_id = $1 AND id = $2 ORDER BY version`,
		tenantID, id)
	if err == nil && len(out) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: list config versions %s: %w", id, err)
	}
	return out, nil
}

// lockConfig locks the row of version 1, which every config has and which
// never goes away, so that writers of one config take turns. Locking the
// latest version instead would not do: a writer waiting on it would find,
// once it gets the lock, that the row is no longer the latest.
func lockConfig(ctx context.Context, tx pgx.Tx, tenantID, id string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM configs WHERE tenant_id = $1 AND id = $2 AND version = 1 FOR NO KEY UPDATE`,
		tenantID, id).Scan(&one)
	return interpretError(err)
}

// PutConfigVersion inserts the next version and supersedes the previous one.
func (s *Store) PutConfigVersion(ctx context.Context, c *store.Config) error {
	if err := c.PrepareVersion(); err != nil {
		return fmt.Errorf("postgres: put config version: %w", err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockConfig(ctx, tx, c.TenantID, c.ID); err != nil {
			return err
		}
		// A new statement: it sees what the previous lock holder committed.
		latest, err := scanConfig(tx.QueryRow(ctx, latestConfig, c.TenantID, c.ID))
		if err != nil {
			return interpretError(err)
		}
		if latest.Status == store.ConfigArchived {
			return store.ErrArchived
		}
		if c.Version != latest.Version+1 {
			return fmt.Errorf("latest version is %d, got %d: %w", latest.Version, c.Version, store.ErrVersionConflict)
		}
		if _, err := tx.Exec(ctx, `UPDATE configs SET superseded_at = $1 WHERE tenant_id = $2 AND id = $3 AND version = $4`,
			c.CreatedAt, c.TenantID, c.ID, latest.Version); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insertConfig, insertConfigArgs(c)...)
		if err := interpretError(err); errors.Is(err, store.ErrAlreadyExists) {
			// Cannot happen while writers take turns on lockConfig; if it
			// does, another writer took this version first.
			return fmt.Errorf("%w: %w", store.ErrVersionConflict, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: put config %s version %d: %w", c.ID, c.Version, err)
	}
	return nil
}

// ArchiveConfig marks the latest version archived; an archived config is
// returned as it is.
func (s *Store) ArchiveConfig(ctx context.Context, tenantID, id string, now int64) (*store.Config, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("postgres: archive config: %w", err)
	}
	var out *store.Config
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockConfig(ctx, tx, tenantID, id); err != nil {
			return err
		}
		c, err := scanConfig(tx.QueryRow(ctx, `UPDATE configs SET status = $1
WHERE tenant_id = $2 AND id = $3 AND superseded_at IS NULL
RETURNING `+configColumns, store.ConfigArchived, tenantID, id))
		if err != nil {
			return interpretError(err)
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: archive config %s: %w", id, err)
	}
	return out, nil
}

// ListConfigs returns the latest version of each matching config by id.
func (s *Store) ListConfigs(ctx context.Context, f store.ConfigFilter) ([]store.Config, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("postgres: list configs: %w", err)
	}
	var q strings.Builder
	q.WriteString(`SELECT ` + configColumns + ` FROM configs WHERE tenant_id = $1 AND superseded_at IS NULL`)
	args := []any{f.TenantID}
	for _, c := range f.Conds() {
		args = append(args, c.Arg)
		fmt.Fprintf(&q, ` AND %s $%d`, c.SQL, len(args))
	}
	args = append(args, limitArg(f.Limit))
	fmt.Fprintf(&q, ` ORDER BY id LIMIT $%d`, len(args))
	out, err := s.queryConfigs(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list configs: %w", err)
	}
	return out, nil
}

// ListActiveConfigsByType returns the latest version of every active config
// of the type, across tenants, by tenant and id.
func (s *Store) ListActiveConfigsByType(ctx context.Context, typ string) ([]store.Config, error) {
	out, err := s.queryConfigs(ctx, `SELECT `+configColumns+` FROM configs
WHERE type = $1 AND status = $2 AND superseded_at IS NULL ORDER BY tenant_id, id`, typ, store.ConfigActive)
	if err != nil {
		return nil, fmt.Errorf("postgres: list active configs of type %s: %w", typ, err)
	}
	return out, nil
}

func (s *Store) queryConfigs(ctx context.Context, q string, args ...any) ([]store.Config, error) {
	rows, err := s.pool.Query(ctx, q, args...)
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
