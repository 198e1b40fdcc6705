package main

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/sdk/webhookverify"
)

func TestReceiver(t *testing.T) {
	var out testutil.Logs
	srv := httptest.NewTLSServer(newMux("/webhooks", [][]byte{[]byte("s3cret")}, time.Minute, &out))
	defer srv.Close()
	body := `{"delivery_id":"del_1","fact":{}}`
	post := func(sig string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks", strings.NewReader(body))
		ts := time.Now().Unix()
		req.Header.Set(webhookverify.HeaderTimestamp, strconv.FormatInt(ts, 10))
		if sig == "" {
			sig = webhookverify.Sign([]byte("s3cret"), ts, []byte(body))
		}
		req.Header.Set(webhookverify.HeaderSignature, sig)
		req.Header.Set(webhookverify.HeaderDeliveryID, "del_1")
		req.Header.Set(webhookverify.HeaderAttempt, "1")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("sha256=bad"); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d", code)
	}
	if code := post(""); code != http.StatusOK {
		t.Fatalf("good delivery: %d", code)
	}
	if code := post(""); code != http.StatusOK {
		t.Fatalf("duplicate: %d", code)
	}
	if got := out.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"delivery_id":"del_1"`) {
		t.Fatalf("printed %q; want the delivery once", got)
	}
}
