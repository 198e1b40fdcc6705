package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/host/gateway"
)

// TestShutdownClosesSilentConnections: a connection that never sends a
// byte (a client's spare connection) does not hold a shutdown until the
// read timeout, while a request already arriving is still answered.
func TestShutdownClosesSilentConnections(t *testing.T) {
	h := setup(t, "sqlite")
	gateway.SetSilentGrace(h.srv, 300*time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ln) }()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	silent := dial()
	// A keep-alive connection that served one request and is idle.
	idle := dial()
	if _, err := io.WriteString(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// A request whose headers are still arriving when the shutdown starts.
	slow := dial()
	if _, err := io.WriteString(slow, "GET /health HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the server read the first bytes

	// The server's read timeout is 30 s; the shutdown is given 10.
	start := time.Now()
	shut := make(chan error, 1)
	go func() { shut <- h.srv.Shutdown(10 * time.Second) }()
	time.Sleep(500 * time.Millisecond)
	if _, err := io.WriteString(slow, "\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatalf("the request in flight was dropped: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "status") {
		t.Fatalf("request in flight: %d %s", resp.StatusCode, body)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("shutdown still waiting on a connection that never sent a byte")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
	silent.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("silent connection still open: %d %v", n, err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
