package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// GetCheckpoint returns the consumer's position, 0 when it has none.
func (s *Store) GetCheckpoint(ctx context.Context, consumer string) (int64, error) {
	var pos int64
	err := s.pool.QueryRow(ctx, `SELECT position FROM checkpoints WHERE consumer = $1`, consumer).Scan(&pos)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: get checkpoint %s: %w", consumer, err)
	}
	return pos, nil
}

// SetCheckpoint stores the consumer's position.
func (s *Store) SetCheckpoint(ctx context.Context, consumer string, position int64) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO checkpoints (consumer, position, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (consumer) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at`,
		consumer, position, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("postgres: set checkpoint %s: %w", consumer, err)
	}
	return nil
}

// ListCheckpoints returns every consumer's position.
func (s *Store) ListCheckpoints(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT consumer, position FROM checkpoints`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list checkpoints: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var (
			c string
			p int64
		)
		if err := rows.Scan(&c, &p); err != nil {
			return nil, fmt.Errorf("postgres: list checkpoints: %w", err)
		}
		out[c] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list checkpoints: %w", err)
	}
	return out, nil
}

// DeleteCheckpoint forgets a consumer.
func (s *Store) DeleteCheckpoint(ctx context.Context, consumer string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM checkpoints WHERE consumer = $1`, consumer); err != nil {
		return fmt.Errorf("postgres: delete checkpoint %s: %w", consumer, err)
	}
	return nil
}
