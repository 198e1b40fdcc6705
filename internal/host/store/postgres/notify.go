package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reconnect backoff of the LISTEN connection.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// listenConnectTimeout bounds one attempt to open the LISTEN connection, so
// an unreachable server is retried rather than waited on for good; a
// connect_timeout in the URL applies within it.
const listenConnectTimeout = 10 * time.Second

var errClosed = errors.New("store closed")

// listener wakes the fact subscribers and entity watches of one Store. It
// holds one dedicated connection (outside the pool) that LISTENs on
// notifyChannel and entityChannel, started by the first SubscribeFacts or
// WatchEntities and kept until Close; when the connection fails it
// reconnects with backoff, and every (re)connection wakes all subscribers
// and resynchronises every watch, since notifications sent while it was
// down are lost.
//
// Every subscriber has a channel with a buffer of one: a signal is dropped
// when one is already pending, so signals coalesce and neither the listener
// nor a writer ever blocks on a slow subscriber.
type listener struct {
	connConfig *pgx.ConnConfig
	logger     *slog.Logger
	heartbeat  time.Duration

	mu        sync.Mutex
	subs      map[chan struct{}]func() bool // channel -> stop of its context.AfterFunc
	watches   map[*entityWatch]struct{}
	closed    bool
	started   bool
	connected bool          // a LISTEN connection is up
	connGen   uint64        // counts the connections that came up
	head      int64         // the highest position a notification announced
	everUp    bool          // one has been up since the first SubscribeFacts
	lastErr   error         // of the last failed connection
	attempted chan struct{} // closed after the first connection attempt
	cancel    context.CancelFunc
	done      chan struct{} // closed when the listen loop has returned
}

func newListener(cfg *pgx.ConnConfig, logger *slog.Logger, heartbeat time.Duration) *listener {
	return &listener{
		connConfig: cfg.Copy(),
		logger:     logger,
		heartbeat:  heartbeat,
		subs:       make(map[chan struct{}]func() bool),
		watches:    make(map[*entityWatch]struct{}),
		attempted:  make(chan struct{}),
	}
}

// SubscribeFacts returns a channel that receives a value after facts are
// committed by any process sharing the database. Signals coalesce and may be
// spurious (one is sent whenever the LISTEN connection is re-established);
// consumers re-read from their position. The channel closes when ctx ends or
// the Store is closed. The first call waits until the LISTEN connection is
// up and fails if it cannot be established.
func (s *Store) SubscribeFacts(ctx context.Context) (<-chan struct{}, error) {
	ch, err := s.facts.subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: subscribe facts: %w", err)
	}
	return ch, nil
}

func (l *listener) subscribe(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errClosed
	}
	l.startLocked()
	attempted := l.attempted
	l.mu.Unlock()

	select {
	case <-attempted:
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	// A listener that never came up is an error; one that is reconnecting
	// will wake the new subscriber once it is back.
	if !l.everUp {
		return nil, fmt.Errorf("listen: %w", l.lastErr)
	}
	ch := make(chan struct{}, 1)
	l.subs[ch] = context.AfterFunc(ctx, func() { l.unsubscribe(ch) })
	return ch, nil
}

// startLocked starts the listen loop unless it runs already; l.mu is held.
func (l *listener) startLocked() {
	if l.started {
		return
	}
	l.started = true
	loopCtx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(loopCtx)
}

func (l *listener) unsubscribe(ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.subs[ch]; ok {
		delete(l.subs, ch)
		close(ch)
	}
}

// notify signals every subscriber and entity watch without blocking: facts
// were committed.
func (l *listener) notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	for w := range l.watches {
		w.signal()
	}
}

// announced records the head position a notification carried.
func (l *listener) announced(pos int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.head = max(l.head, pos)
}

// announcedHead is the highest position announced so far: facts up to it
// are committed.
func (l *listener) announcedHead() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head
}

// entityChanged forwards the payload of an entityChannel notification to
// every entity watch.
func (l *listener) entityChanged(payload string) {
	tenantID, id, err := parseEntityPayload(payload)
	if err != nil {
		// Not one of ours, or garbled: whatever changed is unknown.
		l.logger.Warn("postgres: unreadable entity notification; resynchronising entity watches", "payload", payload, "error", err)
		l.mu.Lock()
		defer l.mu.Unlock()
		for w := range l.watches {
			w.resync()
		}
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.watches {
		w.entityChanged(tenantID, id)
	}
}

// setState records the outcome of a connection attempt and tells the
// entity watches.
func (l *listener) setState(connected bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connected, l.lastErr = connected, err
	l.everUp = l.everUp || connected
	if connected {
		l.connGen++
	}
	for w := range l.watches {
		if connected {
			w.connected(l.connGen)
		} else {
			w.disconnected()
		}
	}
	select {
	case <-l.attempted:
	default:
		close(l.attempted)
	}
}

// run keeps a LISTEN connection up until ctx ends.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := listenBackoffMin
	for {
		wasUp, err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if wasUp {
			backoff = listenBackoffMin
		}
		l.setState(false, err)
		l.logger.Warn("postgres: fact listener lost its connection; reconnecting", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listen connects, LISTENs and forwards notifications until the connection
// fails or ctx ends. wasUp reports whether LISTEN succeeded.
func (l *listener) listen(ctx context.Context) (wasUp bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, listenConnectTimeout)
	conn, err := pgx.ConnectConfig(cctx, l.connConfig)
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	// notifyChannel last: tests find this connection by its last
	// statement.
	for _, ch := range []string{entityChannel, notifyChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return false, err
		}
	}
	l.setState(true, nil)
	// Commits made while no connection was listening went unannounced.
	l.notify()
	for {
		n, err := l.wait(ctx, conn)
		if err != nil {
			return true, err
		}
		if n == nil {
			continue // quiet, and the ping was answered
		}
		if n.Channel == entityChannel {
			l.entityChanged(n.Payload)
		} else {
			if pos, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				l.announced(pos)
			}
			l.notify()
		}
	}
}

// wait waits for the next notification. A connection that died without
// a word (a dropped route, a frozen server) would leave a plain wait
// blocked for good while watches trust it, so after l.heartbeat of quiet
// it pings the server and reports a ping unanswered for twice that as a
// failure; a quiet, live connection gives (nil, nil). A timed-out wait leaves the connection
// usable (pgconn closes it only on other errors), and a notification that
// arrives during the ping is buffered for the next wait.
func (l *listener) wait(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	wctx, cancel := context.WithTimeout(ctx, l.heartbeat)
	n, err := conn.WaitForNotification(wctx)
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return n, err
	}
	// Twice the quiet time: a busy server is slow, not gone.
	pctx, cancel := context.WithTimeout(ctx, 2*l.heartbeat)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		return nil, fmt.Errorf("heartbeat unanswered: %w", err)
	}
	return nil, nil
}

// close stops the listen loop, closes every subscription, ends every
// entity watch and refuses new ones.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	for ch, stop := range l.subs {
		stop()
		delete(l.subs, ch)
		close(ch)
	}
	watches := make([]*entityWatch, 0, len(l.watches))
	for w := range l.watches {
		watches = append(watches, w)
	}
	// Wake subscribe calls waiting for a first attempt that will not come.
	select {
	case <-l.attempted:
	default:
		close(l.attempted)
	}
	l.mu.Unlock()
	for _, w := range watches {
		w.stop()
	}
	if cancel != nil {
		cancel()
		<-done
	}
}
