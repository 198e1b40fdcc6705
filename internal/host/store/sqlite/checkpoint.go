package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// GetCheckpoint returns the consumer's position, 0 when it has none.
func (s *Store) GetCheckpoint(ctx context.Context, consumer string) (int64, error) {
	var pos int64
	err := s.r.QueryRowContext(ctx, `SELECT position FROM checkpoints WHERE consumer = ?`, consumer).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: get checkpoint %s: %w", consumer, err)
	}
	return pos, nil
}

// SetCheckpoint stores the consumer's position.
func (s *Store) SetCheckpoint(ctx context.Context, consumer string, position int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (consumer, position, updated_at) VALUES (?, ?, ?)
ON CONFLICT (consumer) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at`,
			consumer, position, time.Now().UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: set checkpoint %s: %w", consumer, err)
	}
	return nil
}

// ListCheckpoints returns every consumer's position.
func (s *Store) ListCheckpoints(ctx context.Context) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT consumer, position FROM checkpoints`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list checkpoints: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var (
			c string
			p int64
		)
		if err := rows.Scan(&c, &p); err != nil {
			return nil, fmt.Errorf("sqlite: list checkpoints: %w", err)
		}
		out[c] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list checkpoints: %w", err)
	}
	return out, nil
}

// DeleteCheckpoint forgets a consumer.
func (s *Store) DeleteCheckpoint(ctx context.Context, consumer string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE consumer = ?`, consumer)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete checkpoint %s: %w", consumer, err)
	}
	return nil
}
