package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// changedBatch is how many facts one catch-up query of an entity watch
// reads.
const changedBatch = 1000

// watchQueryTimeout bounds each query of an entity watch.
const watchQueryTimeout = 5 * time.Second

var _ store.EntityFeed = (*Store)(nil)

// WatchEntities reports to w every entity change committed by any process
// sharing the database, until ctx ends or the Store is closed (then w gets
// Resync(false)).
//
// Updates, state snapshots and fact appends announce the entities they
// changed on entityChannel. Fact appends also announce the new head
// position on notifyChannel (appends by earlier versions announce only
// that); the watch then reads the facts after the last position it
// reported (the facts table in position order, which is commit order) and
// reports their entities (or, when w is empty, just says Resync(true) and
// moves past them). When the listener connection comes up, the watch
// reads the head first and only then says Resync(true): every change
// committed after that read is announced on the connection that is already
// listening. When it fails, Resync(false) at once.
func (s *Store) WatchEntities(ctx context.Context, w store.EntityWatcher) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	ew := &entityWatch{store: s, w: w, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	if err := s.facts.addWatch(ew); err != nil {
		cancel()
		return fmt.Errorf("postgres: watch entities: %w", err)
	}
	go ew.run(wctx)
	return nil
}

// addWatch registers a watch and starts the listen loop when needed.
func (l *listener) addWatch(w *entityWatch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errClosed
	}
	l.watches[w] = struct{}{}
	l.startLocked()
	if l.connected {
		w.connected(l.connGen)
	}
	return nil
}

func (l *listener) removeWatch(w *entityWatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.watches, w)
}

// entityWatch is one WatchEntities call. The listener goroutine calls
// connected, disconnected, entityChanged, resync and signal; the watch's
// own goroutine reads the head and the facts. Every call to w is made
// holding mu, so w sees them one at a time.
type entityWatch struct {
	store  *Store
	w      store.EntityWatcher
	wake   chan struct{} // buffer 1: facts were committed or the connection changed
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned

	mu     sync.Mutex
	up     bool   // the listener connection is up
	conn   uint64 // its generation
	synced uint64 // the generation w was last told Resync(true) for; 0: w is not live
	ended  bool   // run has returned: w hears nothing more
}

func (e *entityWatch) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *entityWatch) connected(gen uint64) {
	e.mu.Lock()
	e.up, e.conn = true, gen
	e.mu.Unlock()
	e.signal()
}

func (e *entityWatch) disconnected() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.up = false
	e.unsyncLocked()
}

// unsyncLocked takes w out of live mode; e.mu is held.
func (e *entityWatch) unsyncLocked() {
	if e.synced != 0 && !e.ended {
		e.synced = 0
		e.w.Resync(false)
	}
}

// resync makes the watch read the head again and resynchronise w.
func (e *entityWatch) resync() {
	e.mu.Lock()
	e.unsyncLocked()
	e.mu.Unlock()
	e.signal()
}

func (e *entityWatch) entityChanged(tenantID, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.synced != 0 && !e.ended {
		e.w.EntityChanged(tenantID, id)
	}
}

// stop ends the watch and waits for its goroutine.
func (e *entityWatch) stop() {
	e.cancel()
	<-e.done
}

// run keeps w in step with the database until ctx ends.
func (e *entityWatch) run(ctx context.Context) {
	defer close(e.done)
	defer e.store.facts.removeWatch(e)
	defer func() {
		e.mu.Lock()
		e.unsyncLocked()
		e.ended = true
		e.mu.Unlock()
	}()
	var (
		pos     int64 // facts up to here have been reported
		backoff = listenBackoffMin
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		}
		err := e.catchUp(ctx, &pos)
		if err == nil {
			backoff = listenBackoffMin
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// What changed is unknown until a query succeeds: w must not
		// serve meanwhile.
		e.resync()
		e.store.logger.Warn("postgres: entity watch cannot read changes; retrying", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenBackoffMax)
		e.signal()
	}
}

// catchUp brings w up to date: after a (re)connection it reads the head
// and says Resync(true); then it reports the entities of the facts after
// *pos.
func (e *entityWatch) catchUp(ctx context.Context, pos *int64) error {
	for {
		e.mu.Lock()
		up, conn, synced := e.up, e.conn, e.synced
		e.mu.Unlock()
		if !up {
			return nil
		}
		if synced != conn {
			qctx, cancel := context.WithTimeout(ctx, watchQueryTimeout)
			head, err := e.store.HeadPosition(qctx)
			cancel()
			if err != nil {
				return err
			}
			e.mu.Lock()
			if e.up && e.conn == conn && !e.ended {
				*pos = head
				e.synced = conn
				e.w.Resync(true)
			}
			e.mu.Unlock()
			continue
		}
		e.mu.Lock()
		empty := e.w.Empty()
		e.mu.Unlock()
		if empty {
			// Nothing cached can be stale: rather than read which
			// entities changed, move past the announced facts and tell
			// the watcher to forget anything it caught meanwhile.
			if head := e.store.facts.announcedHead(); head > *pos {
				e.mu.Lock()
				if e.synced == conn && !e.ended {
					e.w.Resync(true)
				}
				e.mu.Unlock()
				*pos = head
			}
			return nil
		}
		keys, last, n, err := e.store.changedEntities(ctx, *pos)
		if err != nil {
			return err
		}
		e.mu.Lock()
		if e.synced == conn && !e.ended {
			for _, k := range keys {
				e.w.EntityChanged(k.TenantID, k.ID)
			}
		}
		e.mu.Unlock()
		*pos = last
		if n < changedBatch {
			return nil
		}
	}
}

// changedEntities reads the facts after position after (at most
// changedBatch of them, in position order) and returns their entities
// without repeats, the position of the last fact read (after itself when
// there is none) and how many facts it read.
func (s *Store) changedEntities(ctx context.Context, after int64) (keys []store.EntityKey, last int64, n int, err error) {
	qctx, cancel := context.WithTimeout(ctx, watchQueryTimeout)
	defer cancel()
	rows, err := s.pool.Query(qctx, `SELECT position, tenant_id, COALESCE(entity_id, '') FROM facts
WHERE position > $1 ORDER BY position LIMIT $2`, after, changedBatch)
	if err != nil {
		return nil, after, 0, fmt.Errorf("read changed entities: %w", err)
	}
	defer rows.Close()
	seen := map[store.EntityKey]bool{}
	last = after
	for rows.Next() {
		var k store.EntityKey
		if err := rows.Scan(&last, &k.TenantID, &k.ID); err != nil {
			return nil, after, 0, fmt.Errorf("read changed entities: %w", err)
		}
		n++
		if k.ID != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, after, 0, fmt.Errorf("read changed entities: %w", err)
	}
	return keys, last, n, nil
}
