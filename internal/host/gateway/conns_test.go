package gateway

import (
	"errors"
	"net"
	"testing"
	"time"
)

// A deadline set on a connection another goroutine has closed is not an
// error: fasthttp panics on deadline errors, which took the process down
// when a shutdown closed a silent connection as it began to speak.
func TestDeadlineOnClosedConnectionIsNotAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := &trackedConn{Conn: raw, tracker: &connTracker{conns: map[*trackedConn]struct{}{}}}
	if err := c.closeNow(); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Second)
	for name, set := range map[string]func(time.Time) error{
		"read": c.SetReadDeadline, "write": c.SetWriteDeadline, "both": c.SetDeadline,
	} {
		if err := set(at); err != nil {
			t.Errorf("%s deadline on a closed connection: %v", name, err)
		}
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a closed connection: %v, want net.ErrClosed", err)
	}
}
