package gateway

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// silentConnGrace is how long a connection that has sent nothing may stay
// open once a shutdown has begun, as net/http treats new connections.
const silentConnGrace = 5 * time.Second

// stoppedRequestGrace is how long a shutdown whose drain ran out waits
// for the requests it stopped to answer: a stopped request answers at
// once, and its release of an Idempotency-Key takes a statement.
const stoppedRequestGrace = 3 * time.Second

// idleDrain is how long a keep-alive connection that is idle when a
// shutdown begins is still read from: a request the client wrote just
// before is already in the socket and is read at once; a connection that
// stays silent that long is closed.
const idleDrain = time.Second

// connTracker wraps the listener to follow each connection through a
// shutdown.
//
// It learns which connections have never sent a byte: fasthttp marks a
// fresh connection active before reading its first request, so its
// shutdown waits for such a connection's read timeout; HTTP clients open
// spare connections they may never use (Go's transport dials one while
// waiting for an idle one), and a shutdown would otherwise wait out the
// full read timeout for each of them.
//
// It also keeps a request written to an idle keep-alive connection just
// before a shutdown from being lost: fasthttp's shutdown closes idle
// connections outright, and its loop stops between two requests without
// reading the socket; closing a socket with unread bytes resets the
// connection and the client gets no answer. Instead such a connection is
// read from for idleDrain more, and a request found there is served (with
// Connection: close, as every answer during a shutdown).
type connTracker struct {
	mu       sync.Mutex
	conns    map[*trackedConn]struct{}
	draining atomic.Bool
	srv      *fasthttp.Server
}

type trackedConn struct {
	net.Conn
	tracker *connTracker
	opened  time.Time
	spoken  atomic.Bool
	once    sync.Once
	// unread holds bytes read to learn whether a request was waiting,
	// returned by the next Read.
	unread []byte

	mu sync.Mutex
	// idle: waiting for the next request, as fasthttp reports (ConnState).
	idle bool
	// pending: bytes of a new request were read since the last one ended.
	pending bool
	// drainBy is set once a shutdown asked to close the connection; while
	// no request is pending, no read deadline passes it.
	drainBy time.Time
	// servedAgain: the connection was served again once already.
	servedAgain bool
}

func (c *trackedConn) Read(p []byte) (int, error) {
	if len(c.unread) > 0 {
		n := copy(p, c.unread)
		c.unread = c.unread[n:]
		return n, nil
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if !c.spoken.Load() {
			c.spoken.Store(true)
		}
		c.mu.Lock()
		c.pending = true
		c.mu.Unlock()
	}
	return n, err
}

// SetReadDeadline keeps a draining connection's deadline while it waits
// for a request: fasthttp sets the idle timeout when it starts waiting,
// which may come after the shutdown asked for the drain.
func (c *trackedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pending && !c.drainBy.IsZero() && (t.IsZero() || t.After(c.drainBy)) {
		t = c.drainBy
	}
	return ignoreClosed(c.Conn.SetReadDeadline(t))
}

func (c *trackedConn) SetWriteDeadline(t time.Time) error {
	return ignoreClosed(c.Conn.SetWriteDeadline(t))
}

func (c *trackedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// ignoreClosed drops the error of a deadline set on a connection that is
// already closed (a shutdown closes silent connections from another
// goroutine): fasthttp panics on any deadline error, while the read or
// write that follows fails with the same cause and ends the connection
// as a plain network error.
func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close closes the connection, except during a shutdown: fasthttp's
// shutdown closes the connections it counts as idle, one of which may be
// receiving a request or about to wait for one, so the connection is only
// given the drain deadline. Every other close is the server's own, once it
// is done with the connection, and StateClosed follows it (see state).
func (c *trackedConn) Close() error {
	if !c.tracker.draining.Load() {
		return c.closeNow()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drainBy.IsZero() {
		c.drainBy = time.Now().Add(idleDrain)
	}
	if c.pending {
		return nil // a request is being read: its own deadline holds
	}
	return c.Conn.SetReadDeadline(c.drainBy)
}

func (c *trackedConn) closeNow() error {
	c.once.Do(func() { c.tracker.forget(c) })
	return c.Conn.Close()
}

type trackingListener struct {
	net.Listener
	tracker *connTracker
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, tracker: l.tracker, opened: time.Now()}
	l.tracker.mu.Lock()
	if l.tracker.conns == nil {
		l.tracker.conns = make(map[*trackedConn]struct{})
	}
	l.tracker.conns[tc] = struct{}{}
	l.tracker.mu.Unlock()
	return tc, nil
}

// hook has srv report connection states to the tracker and announce
// Connection: close on every answer once its shutdown has begun.
func (t *connTracker) hook(srv *fasthttp.Server) {
	t.srv = srv
	srv.CloseOnShutdown = true
	srv.ConnState = t.state
}

func (t *connTracker) state(nc net.Conn, st fasthttp.ConnState) {
	c, ok := nc.(*trackedConn)
	if !ok {
		return
	}
	switch st {
	case fasthttp.StateIdle, fasthttp.StateActive:
		c.mu.Lock()
		c.idle = st == fasthttp.StateIdle
		if c.idle {
			c.pending = false
		}
		c.mu.Unlock()
	case fasthttp.StateClosed:
		// The server is done with the connection, which Close left open
		// during a shutdown. If it stopped between two requests, the
		// client may have written the next one already.
		c.mu.Lock()
		again := t.draining.Load() && c.idle && !c.servedAgain
		c.servedAgain = c.servedAgain || again
		c.mu.Unlock()
		if !again {
			_ = c.closeNow()
			return
		}
		go t.serveAgain(c)
	}
}

// serveAgain serves a request that was waiting on a connection fasthttp
// left between two requests during a shutdown, and closes it.
func (t *connTracker) serveAgain(c *trackedConn) {
	defer func() { _ = c.closeNow() }()
	c.mu.Lock()
	by := c.drainBy
	c.mu.Unlock()
	if err := c.Conn.SetReadDeadline(by); err != nil {
		return
	}
	buf := make([]byte, 1024)
	n, _ := c.Conn.Read(buf)
	if n == 0 {
		return // silent: nothing to answer
	}
	c.unread = buf[:n]
	c.mu.Lock()
	c.pending = true
	c.mu.Unlock()
	_ = t.srv.ServeConn(c) // the answer says Connection: close
}

// drain makes connections drain instead of closing from now on.
func (t *connTracker) drain() { t.draining.Store(true) }

// wait waits until every connection is closed, up to deadline: fasthttp's
// shutdown returns once its loops have ended, before it reports the last
// of them closed, and a connection may then be served again.
func (t *connTracker) wait(deadline time.Time) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		t.mu.Lock()
		open := len(t.conns)
		t.mu.Unlock()
		if open == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

func (t *connTracker) forget(c *trackedConn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// closeSilent closes the connections that have sent nothing for at least
// grace since they opened.
func (t *connTracker) closeSilent(grace time.Duration) int {
	now := time.Now()
	var silent []*trackedConn
	t.mu.Lock()
	for c := range t.conns {
		if !c.spoken.Load() && now.Sub(c.opened) >= grace {
			silent = append(silent, c)
		}
	}
	t.mu.Unlock()
	for _, c := range silent {
		_ = c.closeNow()
	}
	return len(silent)
}
