package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/singleflight"

	"github.com/factline/factline/internal/host/store"
)

// writeProbeTTL is how long a write probe's answer serves later callers.
const writeProbeTTL = time.Second

// writeProbeTimeout bounds a probe: well inside the 2 s /health gives a
// check, so that the check says what failed rather than that it ran out.
const writeProbeTimeout = 1500 * time.Millisecond

// writeProbe tells whether the database takes writes, which a ping does
// not: a server answers pings while it refuses every write (a standby
// after a failover, default_transaction_read_only) or while its commits
// wait without end (synchronous_standby_names naming a standby that is
// gone). The probe is a write: it updates the one row of table
// write_probe and commits. Probes are shared: callers
// within writeProbeTTL of the last one get its answer and callers during
// one wait for it, so a flood of anonymous /health requests costs at most
// one commit a second.
type writeProbe struct {
	flight singleflight.Group
	mu     sync.Mutex
	at     time.Time // when the last probe ended; zero before the first
	err    error     // its outcome
}

// probeWrites returns nil when the database took and confirmed a write
// within writeProbeTTL, or why it did not.
func (s *Store) probeWrites(ctx context.Context) error {
	p := &s.writes
	p.mu.Lock()
	if !p.at.IsZero() && time.Since(p.at) < writeProbeTTL {
		err := p.err
		p.mu.Unlock()
		return err
	}
	p.mu.Unlock()
	_, err, _ := p.flight.Do("", func() (any, error) {
		// Shared by every caller waiting: bounded by its own timeout,
		// not by the first caller's deadline.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeProbeTimeout)
		defer cancel()
		err := s.writeOnce(pctx)
		p.mu.Lock()
		p.at, p.err = time.Now(), err
		p.mu.Unlock()
		return nil, err
	})
	return err
}

// writeOnce runs one probe.
func (s *Store) writeOnce(ctx context.Context) error {
	// A row written, not just a transaction id taken: a commit that wrote
	// no WAL does not wait for a synchronous standby. A read-only server
	// refuses the update (store.ErrReadOnly).
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE write_probe SET probed_at = now() WHERE id = 1`)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrReadOnly):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: a write was not confirmed within %v", store.ErrUnavailable, writeProbeTimeout)
	}
	return fmt.Errorf("write probe: %w", err)
}
