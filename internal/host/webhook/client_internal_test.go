package webhook

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestBodyOutlastingTheTimeoutIsATimeout: a receiver that answers 200 and
// then trickles its body past the attempt's timeout has not answered in
// time: the attempt is a timeout, as the contract counts it, not a
// success.
func TestBodyOutlastingTheTimeoutIsATimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	}))
	defer srv.Close()
	d := &deliveryRequest{url: srv.URL, body: []byte(`{}`), secret: "whsec_c2VjcmV0", deliveryID: "del_1", timestamp: 1, version: 1, attempt: 1,
		timeout: 300 * time.Millisecond}
	r := send(srv.Client(), t.Context(), d, time.Now)
	if r.errType != ErrorTransient || r.errCode != CodeTimeout {
		t.Fatalf("result %+v, want a transient %s", r, CodeTimeout)
	}
}
