package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// SetCheckpoints stores the positions of many consumers in one statement.
// Rows are written in name order, so two writers of overlapping sets
// cannot deadlock.
func (s *Store) SetCheckpoints(ctx context.Context, positions map[string]int64) error {
	if len(positions) == 0 {
		return nil
	}
	names := make([]string, 0, len(positions))
	for n := range positions {
		names = append(names, n)
	}
	slices.Sort(names)
	pos := make([]int64, len(names))
	for i, n := range names {
		pos[i] = positions[n]
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO checkpoints (consumer, position, updated_at)
SELECT c, p, $3 FROM unnest($1::text[], $2::bigint[]) AS t(c, p)
ON CONFLICT (consumer) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at`,
		names, pos, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("postgres: set %d checkpoints: %w", len(names), err)
	}
	return nil
}
