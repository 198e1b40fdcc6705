package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/factline/factline/internal/host/store"
)

// SavePluginVersion stores a binary; the same name and SHA256 again is a
// no-op.
func (s *Store) SavePluginVersion(ctx context.Context, p *store.PluginBinary) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO plugin_versions (name, sha256, version, wasm, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (name, sha256) DO NOTHING`, p.Name, p.SHA256, p.Version, p.Wasm, p.CreatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: save plugin %s: %w", p.Name, interpretError(err))
	}
	return nil
}

// GetPluginVersion returns one stored binary or ErrNotFound.
func (s *Store) GetPluginVersion(ctx context.Context, name, sha256 string) (*store.PluginBinary, error) {
	p := &store.PluginBinary{Name: name, SHA256: sha256}
	err := s.r.QueryRowContext(ctx, `SELECT version, wasm, created_at FROM plugin_versions WHERE name = ? AND sha256 = ?`, name, sha256).
		Scan(&p.Version, &p.Wasm, &p.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get plugin %s@%s: %w", name, sha256, interpretError(err))
	}
	return p, nil
}

// ActivatePlugin makes a stored version the active one.
func (s *Store) ActivatePlugin(ctx context.Context, name, sha256 string, now int64) (*store.PluginActivation, error) {
	return s.activatePlugin(ctx, name, sha256, nil, now)
}

// ActivatePluginIf is ActivatePlugin done only while expected is the
// active version ("" for none), else store.ErrVersionConflict.
func (s *Store) ActivatePluginIf(ctx context.Context, name, sha256, expected string, now int64) (*store.PluginActivation, error) {
	return s.activatePlugin(ctx, name, sha256, &expected, now)
}

// activatePlugin activates sha256, when expected is not nil only while
// *expected is the active version: compared within the write transaction,
// so no other activation comes in between.
func (s *Store) activatePlugin(ctx context.Context, name, sha256 string, expected *string, now int64) (*store.PluginActivation, error) {
	a := &store.PluginActivation{ActivePlugin: store.ActivePlugin{Name: name, SHA256: sha256, UpdatedAt: now}}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM plugin_versions WHERE name = ? AND sha256 = ?`, name, sha256).Scan(&one); err != nil {
			return interpretError(err)
		}
		var cur, curVersion, prev, prevVersion string
		var updated int64
		err := tx.QueryRowContext(ctx, `SELECT a.sha256, COALESCE(c.version, ''), a.previous, COALESCE(p.version, ''), a.updated_at
FROM plugin_active a
LEFT JOIN plugin_versions c ON c.name = a.name AND c.sha256 = a.sha256
LEFT JOIN plugin_versions p ON p.name = a.name AND p.sha256 = a.previous
WHERE a.name = ?`, name).Scan(&cur, &curVersion, &prev, &prevVersion, &updated)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if expected != nil && cur != *expected {
			return fmt.Errorf("the active version is %q, not %q: %w", cur, *expected, store.ErrVersionConflict)
		}
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case cur == sha256:
			// Re-activating the active version keeps its history.
			a.Previous, a.PreviousVersion, a.UpdatedAt = prev, prevVersion, updated
			return nil
		default:
			a.Previous, a.PreviousVersion = cur, curVersion
		}
		a.Changed = true
		_, err = tx.ExecContext(ctx, `INSERT INTO plugin_active (name, sha256, previous, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, previous = excluded.previous, updated_at = excluded.updated_at`,
			name, sha256, a.Previous, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: activate plugin %s@%s: %w", name, sha256, err)
	}
	return a, nil
}

// ActivePlugins lists the active version of every plugin, by name.
func (s *Store) ActivePlugins(ctx context.Context) ([]store.ActivePlugin, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT a.name, a.sha256, a.previous, COALESCE(p.version, ''), a.updated_at
FROM plugin_active a LEFT JOIN plugin_versions p ON p.name = a.name AND p.sha256 = a.previous
ORDER BY a.name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: active plugins: %w", err)
	}
	defer rows.Close()
	var out []store.ActivePlugin
	for rows.Next() {
		var a store.ActivePlugin
		if err := rows.Scan(&a.Name, &a.SHA256, &a.Previous, &a.PreviousVersion, &a.UpdatedAt); err != nil {
			return nil, fmt.Errorf("sqlite: active plugins: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
