package webhookverify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/sdk/webhookverify"
)

var (
	secret = []byte("whsec_test-secret")
	body   = []byte(`{"delivery_id":"del_x","trigger":"outcome.deal_won"}`)
	t0     = time.Unix(1_700_000_000, 0)
)

func headers(sig string, ts int64, id string) http.Header {
	h := http.Header{}
	if sig != "" {
		h.Set(webhookverify.HeaderSignature, sig)
	}
	if ts != 0 {
		h.Set(webhookverify.HeaderTimestamp, strconv.FormatInt(ts, 10))
	}
	if id != "" {
		h.Set(webhookverify.HeaderDeliveryID, id)
	}
	return h
}

func TestSignMatchesTheContract(t *testing.T) {
	t.Parallel()
	// Independent of the package: "sha256=" + hex HMAC-SHA256 of "<ts>.<body>".
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("1700000000." + string(body)))
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	if got := webhookverify.Sign(secret, 1_700_000_000, body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	good := webhookverify.Sign(secret, t0.Unix(), body)
	cases := []struct {
		name string
		h    http.Header
		body []byte
		now  time.Time
		tol  time.Duration
		want error
	}{
		{"valid", headers(good, t0.Unix(), ""), body, t0, 0, nil},
		{"valid at 300 s", headers(good, t0.Unix(), ""), body, t0.Add(300 * time.Second), 0, nil},
		{"too old at 301 s", headers(good, t0.Unix(), ""), body, t0.Add(301 * time.Second), 0, webhookverify.ErrTimestampTooOld},
		{"a larger tolerance", headers(good, t0.Unix(), ""), body, t0.Add(time.Hour), 2 * time.Hour, nil},
		{"future beyond tolerance", headers(good, t0.Unix(), ""), body, t0.Add(-301 * time.Second), 0, webhookverify.ErrTimestampFuture},
		{"no signature", headers("", t0.Unix(), ""), body, t0, 0, webhookverify.ErrMissingHeader},
		{"no timestamp", headers(good, 0, ""), body, t0, 0, webhookverify.ErrMissingHeader},
		{"tampered body", headers(good, t0.Unix(), ""), append([]byte(" "), body...), t0, 0, webhookverify.ErrInvalidSignature},
		{"other timestamp", headers(good, t0.Unix()+1, ""), body, t0, 0, webhookverify.ErrInvalidSignature},
		{"upper-case hex", headers(strings.ToUpper(good), t0.Unix(), ""), body, t0, 0, webhookverify.ErrInvalidSignature},
	}
	for _, c := range cases {
		_, err := webhookverify.Verify(c.h, c.body, c.now, c.tol, secret)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	h := headers(good, t0.Unix(), "")
	h.Set(webhookverify.HeaderTimestamp, "soon")
	if _, err := webhookverify.Verify(h, body, t0, 0, secret); !errors.Is(err, webhookverify.ErrBadTimestamp) {
		t.Errorf("non-numeric timestamp: %v", err)
	}
	// During a rotation either secret verifies.
	if _, err := webhookverify.Verify(headers(good, t0.Unix(), ""), body, t0, 0, []byte("new"), secret); err != nil {
		t.Errorf("old secret among two: %v", err)
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	now := t0
	handled := 0
	fail := false
	v := &webhookverify.Verifier{Secrets: [][]byte{secret}, Now: func() time.Time { return now }}
	h := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := webhookverify.FromContext(r.Context())
		b, _ := io.ReadAll(r.Body)
		if !ok || d.ID != "del_1" || string(b) != string(body) || d.Attempt != 2 {
			t.Errorf("delivery %+v, body %q", d, b)
		}
		handled++
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	send := func(sig string, ts int64) int {
		r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(string(body)))
		r.Header = headers(sig, ts, "del_1")
		r.Header.Set(webhookverify.HeaderAttempt, "2")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	good := webhookverify.Sign(secret, t0.Unix(), body)
	if code := send("sha256=00", t0.Unix()); code != http.StatusUnauthorized || handled != 0 {
		t.Fatalf("bad signature: %d, handled %d", code, handled)
	}
	fail = true
	if code := send(good, t0.Unix()); code != http.StatusInternalServerError || handled != 1 {
		t.Fatalf("failing handler: %d, handled %d", code, handled)
	}
	fail = false
	// The failed delivery is not remembered: its retry is handled.
	if code := send(good, t0.Unix()); code != http.StatusOK || handled != 2 {
		t.Fatalf("retry: %d, handled %d", code, handled)
	}
	if code := send(good, t0.Unix()); code != http.StatusOK || handled != 2 {
		t.Fatalf("duplicate: %d, handled %d", code, handled)
	}
	now = t0.Add(301 * time.Second)
	if code := send(good, t0.Unix()); code != http.StatusUnauthorized {
		t.Fatalf("stale: %d", code)
	}
}

func TestMemoryDeduperRetention(t *testing.T) {
	t.Parallel()
	d := webhookverify.NewMemoryDeduper(time.Hour)
	d.Mark("a", t0)
	if !d.Seen("a", t0.Add(59*time.Minute)) || d.Seen("a", t0.Add(time.Hour)) || d.Seen("b", t0) {
		t.Fatal("retention")
	}
}

func ExampleVerify() {
	secret := []byte("whsec_example")
	body := []byte(`{"delivery_id":"del_1"}`)
	now := time.Unix(1_700_000_000, 0)
	h := http.Header{}
	h.Set("X-Svc-Timestamp", "1700000000")
	h.Set("X-Svc-Signature", webhookverify.Sign(secret, 1_700_000_000, body))

	_, err := webhookverify.Verify(h, body, now, 0, secret)
	fmt.Println("valid:", err == nil)
	_, err = webhookverify.Verify(h, body, now.Add(10*time.Minute), 0, secret)
	fmt.Println("ten minutes later:", err)
	// Output:
	// valid: true
	// ten minutes later: webhookverify: timestamp is too old: 600 s old, tolerance 5m0s
}

func ExampleSign() {
	fmt.Println(webhookverify.Sign([]byte("secret"), 1_700_000_000, []byte(`{}`)))
	// Output: sha256=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163
}

func ExampleVerifier_Handler() {
	v := &webhookverify.Verifier{Secrets: [][]byte{[]byte("whsec_example")}}
	http.Handle("/webhooks", v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := webhookverify.FromContext(r.Context())
		fmt.Printf("delivery %s, attempt %d\n", d.ID, d.Attempt)
	})))
	// Then: http.ListenAndServeTLS(":8443", "cert.pem", "key.pem", nil)
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"a":1}`), "sha256=00", "1700000000", int64(0))
	f.Add([]byte(``), "", "", int64(5))
	f.Add([]byte(`x`), "sha256=", "-1", int64(-400))
	f.Fuzz(func(t *testing.T, body []byte, sig, ts string, skew int64) {
		h := http.Header{}
		h.Set(webhookverify.HeaderSignature, sig)
		h.Set(webhookverify.HeaderTimestamp, ts)
		now := t0.Add(time.Duration(skew%1000) * time.Second)
		_, _ = webhookverify.Verify(h, body, now, 0, secret) // never panics
		// A correctly signed body always verifies.
		h.Set(webhookverify.HeaderTimestamp, strconv.FormatInt(t0.Unix(), 10))
		h.Set(webhookverify.HeaderSignature, webhookverify.Sign(secret, t0.Unix(), body))
		if _, err := webhookverify.Verify(h, body, t0, 0, secret); err != nil {
			t.Fatalf("signed body rejected: %v", err)
		}
		// And a different secret never does.
		if _, err := webhookverify.Verify(h, body, t0, 0, []byte("other")); err == nil {
			t.Fatal("wrong secret accepted")
		}
	})
}
