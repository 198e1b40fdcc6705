package webhook

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
)

// A second connection to an endpoint resumes the first one's TLS
// session (no full handshake), and a config's own TLS settings keep
// working.
func TestConnectionsResumeTLSSessions(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		resumed []bool
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		resumed = append(resumed, r.TLS.DidResume)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	rc := &receiver{srv: srv}
	client := newHTTPClient(addressPolicy{allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, rc.tlsConfig(), 8)
	for range 2 {
		resp, err := client.Post(srv.URL+"/hook", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// A new connection for the next request.
		client.CloseIdleConnections()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resumed) != 2 || resumed[0] || !resumed[1] {
		t.Errorf("resumed per connection %v, want [false true]", resumed)
	}
}
