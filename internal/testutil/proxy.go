package testutil

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections on loopback to a target so a test can cut
// the path between a client and a server: [Proxy.SetDown] drops every
// connection and refuses new ones, as an unreachable server would;
// [Proxy.Freeze] keeps connections open but lets no byte through, as a
// dropped route or a frozen server would.
type Proxy struct {
	addr   string
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	down   bool
	frozen bool
	conns  map[net.Conn]struct{}
}

// NewProxy starts a proxy to target; it stops when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.SetDown(true)
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, discarding what arrives while frozen, and closes
// both when either side ends.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen := p.frozen
			p.mu.Unlock()
			if !frozen {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
	dst.Close()
	src.Close()
}

// SetDown switches the proxy off (dropping open connections) or on.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		p.closeAllLocked()
	}
}

// Freeze stops every byte in both directions while the connections stay
// open; new connections are accepted and frozen too.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Thaw ends a freeze: the frozen connections are reset, as a route that
// comes back finds its peers forgot them, and new ones flow again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
	p.closeAllLocked()
}

func (p *Proxy) closeAllLocked() {
	for c := range p.conns {
		c.Close()
	}
}

// ProxyPostgres routes the PostgreSQL URL direct through a new Proxy and
// returns the URL that goes through it, with a connect timeout of 2 s (a
// frozen proxy must not hold a connection attempt for long), and the
// Proxy.
func ProxyPostgres(t testing.TB, direct string) (string, *Proxy) {
	t.Helper()
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	px := NewProxy(t, u.Host)
	u.Host = px.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return u.String(), px
}
