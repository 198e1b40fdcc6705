package gateway

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// silentConnGrace is how long a connection that has sent nothing may stay
// open once a shutdown has begun, as net/http treats new connections.
const silentConnGrace = 5 * time.Second

// connTracker wraps the listener to learn which connections have never
// sent a byte. fasthttp marks a fresh connection active before reading
// its first request, so its shutdown waits for such a connection's read
// timeout; HTTP clients open spare connections they may never use (Go's
// transport dials one while waiting for an idle one), and a shutdown would
// otherwise wait out the full read timeout for each of them.
type connTracker struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

type trackedConn struct {
	net.Conn
	tracker *connTracker
	opened  time.Time
	spoken  atomic.Bool
	once    sync.Once
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.spoken.Load() {
		c.spoken.Store(true)
	}
	return n, err
}

func (c *trackedConn) Close() error {
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
		c.Close()
	}
	return len(silent)
}
