package sqlite

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// feedInterval is how often an entity watch asks the database file whether
// a connection other than this Store's writer has committed: the bound on
// how long another process's (or another Store's) write to an entity may
// go unseen by a cache fed by WatchEntities.
const feedInterval = 50 * time.Millisecond

// watchQueryTimeout bounds each look at the file; a look that takes longer
// (the writer connection busy that long) counts as a failure: the watcher
// stops serving until one succeeds.
const watchQueryTimeout = 5 * time.Second

// watchBackoffMax bounds the wait between failed looks.
const watchBackoffMax = time.Second

var _ store.EntityFeed = (*Store)(nil)

// WatchEntities reports to w every entity change committed to the file,
// until ctx ends or the Store is closed (then w gets Resync(false)).
//
// Changes committed through this Store are reported by its write path,
// right after the commit and before the write returns. Commits by any
// other connection (another process, another Store on the same file) are
// found with PRAGMA data_version on this Store's writer connection, every
// feedInterval: it changes when, and only when, another connection has
// committed, and its own commits leave it alone, so no bookkeeping of this
// Store's writes is needed to tell them apart. Which entities another
// connection changed is not known: the watch says Resync(true). The first
// look sets the baseline and says Resync(true); a failed look says
// Resync(false) at once, and the next successful one Resync(true).
func (s *Store) WatchEntities(ctx context.Context, w store.EntityWatcher) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ew := &entityWatch{store: s, w: w}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	if s.watch.closed {
		return fmt.Errorf("sqlite: watch entities: %w", errClosed)
	}
	s.watch.watches[ew] = struct{}{}
	s.watch.n.Add(1)
	s.watch.wg.Add(1)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.watch.ctx, cancel)
	go func() {
		defer s.watch.wg.Done()
		defer cancel()
		defer stop()
		ew.run(wctx)
	}()
	return nil
}

// watches are a Store's entity watches.
type watches struct {
	ctx    context.Context // ends when the Store closes
	cancel context.CancelFunc
	wg     sync.WaitGroup // the watches' goroutines

	mu      sync.Mutex
	watches map[*entityWatch]struct{}
	closed  bool
	n       atomic.Int64 // len(watches), read without mu by writers
	looks   atomic.Int64 // successful looks at the data version, for tests
}

func newWatches() *watches {
	ctx, cancel := context.WithCancel(context.Background())
	return &watches{ctx: ctx, cancel: cancel, watches: map[*entityWatch]struct{}{}}
}

// close ends every watch and waits for their goroutines.
func (ws *watches) close() {
	ws.mu.Lock()
	ws.closed = true
	ws.mu.Unlock()
	ws.cancel()
	ws.wg.Wait()
}

func (ws *watches) remove(e *entityWatch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.watches, e)
	ws.n.Add(-1)
}

// changed reports entities written through this Store to every watch. The
// write path calls it after a commit, whatever its outcome.
func (ws *watches) changed(keys ...store.EntityKey) {
	if ws.n.Load() == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for e := range ws.watches {
		e.changed(keys)
	}
}

// appended reports the entities of appends written through this Store.
func (ws *watches) appended(items []store.Append) {
	if ws.n.Load() == 0 {
		return
	}
	ws.changed(entityKeysOf(items)...)
}

// entityWatch is one WatchEntities call. Every call to w is made holding
// mu, so w sees them one at a time.
type entityWatch struct {
	store *Store
	w     store.EntityWatcher

	mu    sync.Mutex
	live  bool // w was last told Resync(true)
	ended bool // run has returned: w hears nothing more
}

func (e *entityWatch) changed(keys []store.EntityKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.live || e.ended {
		return
	}
	for _, k := range keys {
		e.w.EntityChanged(k.TenantID, k.ID)
	}
}

func (e *entityWatch) resync(live bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended || (!live && !e.live) {
		return
	}
	e.live = live
	e.w.Resync(live)
}

// run looks at the file every feedInterval until ctx ends.
func (e *entityWatch) run(ctx context.Context) {
	defer e.store.watch.remove(e)
	defer func() {
		e.resync(false)
		e.mu.Lock()
		e.ended = true
		e.mu.Unlock()
	}()
	var (
		last    dataVersion
		synced  bool // last is the baseline w was told Resync(true) for
		backoff = feedInterval
	)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := e.store.dataVersion(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			// What other connections committed is unknown until a look
			// succeeds: w must not serve meanwhile.
			synced = false
			e.resync(false)
			e.store.logger.Warn("sqlite: entity watch cannot read the data version; retrying", "error", err, "in", backoff)
			t.Reset(backoff)
			backoff = min(2*backoff, watchBackoffMax)
			continue
		case !synced || v != last:
			last, synced = v, true
			e.resync(true)
		}
		e.store.watch.looks.Add(1) // after w heard what the look found
		backoff = feedInterval
		t.Reset(feedInterval)
	}
}

// dataVersion is PRAGMA data_version of one connection; values of
// different connections do not compare.
type dataVersion struct {
	conn any // the driver's connection
	v    int64
}

// dataVersion reads PRAGMA data_version on the writer connection. The
// writer pool holds one connection; should database/sql ever replace it,
// the new connection's value differs in conn, which counts as a change.
func (s *Store) dataVersion(ctx context.Context) (dataVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, watchQueryTimeout)
	defer cancel()
	var dv dataVersion
	c, err := s.w.Conn(ctx)
	if err != nil {
		return dv, fmt.Errorf("data version: %w", err)
	}
	defer c.Close()
	if err := c.Raw(func(dc any) error { dv.conn = dc; return nil }); err != nil {
		return dv, fmt.Errorf("data version: %w", err)
	}
	// The pragma takes only a WAL read lock, which does not wait for
	// writers, so a context that cannot end is safe here; it spares the
	// goroutines the driver and database/sql start per query to watch one
	// that can.
	if err := c.QueryRowContext(context.WithoutCancel(ctx), `PRAGMA data_version`).Scan(&dv.v); err != nil {
		return dv, fmt.Errorf("data version: %w", err)
	}
	return dv, nil
}

// entityKeysOf returns the entities of appends, without repeats.
func entityKeysOf(items []store.Append) []store.EntityKey {
	keys := make([]store.EntityKey, 0, len(items))
	seen := make(map[store.EntityKey]struct{}, len(items))
	for _, it := range items {
		k := store.EntityKey{TenantID: it.Fact.TenantID, ID: it.Fact.EntityID}
		if k.ID == "" {
			continue
		}
		if _, ok := seen[k]; ok {
			continue
		}
		seen[k] = struct{}{}
		keys = append(keys, k)
	}
	return keys
}
