package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SetCheckpoints stores the positions of many consumers in one
// transaction.
func (s *Store) SetCheckpoints(ctx context.Context, positions map[string]int64) error {
	if len(positions) == 0 {
		return nil
	}
	now := time.Now().UnixMilli()
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO checkpoints (consumer, position, updated_at) VALUES (?, ?, ?)
ON CONFLICT (consumer) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for consumer, position := range positions {
			if _, err := stmt.ExecContext(ctx, consumer, position, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: set %d checkpoints: %w", len(positions), err)
	}
	return nil
}
