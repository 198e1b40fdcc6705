// Command receiver is a runnable webhook receiver for Factline deliveries,
// built on sdk/webhookverify: it verifies each delivery's signature and
// timestamp, answers duplicates with 200 without handling them again,
// answers bad signatures with 401, and prints each verified delivery as
// one JSON line on stdout.
//
//	WEBHOOK_SECRET=whsec_... go run ./examples/receiver -addr :8443 -cert cert.pem -key key.pem
//
// Flags:
//
//	-addr       listen address (default :8443)
//	-path       the path deliveries are posted to (default /webhooks)
//	-cert/-key  TLS certificate and key; without them it serves plain HTTP
//	            (Factline delivers to https:// URLs only: put it behind TLS)
//	-tolerance  accepted signature timestamp age (default 300s)
//
// WEBHOOK_SECRET holds the secret returned by POST
// /v1/admin/webhooks/secrets; WEBHOOK_PREVIOUS_SECRET, during a rotation,
// the one before it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/factline/factline/sdk/webhookverify"
)

func main() {
	addr := flag.String("addr", ":8443", "listen address")
	path := flag.String("path", "/webhooks", "path deliveries are posted to")
	cert := flag.String("cert", "", "TLS certificate file")
	key := flag.String("key", "", "TLS key file")
	tolerance := flag.Duration("tolerance", webhookverify.DefaultTolerance, "accepted signature timestamp age")
	flag.Parse()

	secrets := [][]byte{}
	for _, env := range []string{"WEBHOOK_SECRET", "WEBHOOK_PREVIOUS_SECRET"} {
		if v := os.Getenv(env); v != "" {
			secrets = append(secrets, []byte(v))
		}
	}
	if len(secrets) == 0 {
		log.Fatal("receiver: set WEBHOOK_SECRET to the webhook's signing secret")
	}
	srv := &http.Server{
		Addr:              *addr,
		Handler:           newMux(*path, secrets, *tolerance, os.Stdout),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("receiver: listening on %s%s", *addr, *path)
	var err error
	if *cert != "" {
		err = srv.ListenAndServeTLS(*cert, *key)
	} else {
		err = srv.ListenAndServe()
	}
	log.Fatal(err)
}

// received is what the receiver prints for each delivery.
type received struct {
	DeliveryID string          `json:"delivery_id"`
	Attempt    int             `json:"attempt"`
	Timestamp  int64           `json:"timestamp"`
	Body       json.RawMessage `json:"body"`
}

// newMux serves verified deliveries at path.
func newMux(path string, secrets [][]byte, tolerance time.Duration, out io.Writer) http.Handler {
	v := &webhookverify.Verifier{Secrets: secrets, Tolerance: tolerance}
	enc := json.NewEncoder(out)
	mux := http.NewServeMux()
	mux.Handle(path, v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := webhookverify.FromContext(r.Context())
		rec := received{DeliveryID: d.ID, Attempt: d.Attempt, Timestamp: d.Timestamp, Body: d.Body}
		if !json.Valid(d.Body) {
			http.Error(w, "body is not JSON", http.StatusBadRequest)
			return
		}
		if err := enc.Encode(rec); err != nil {
			http.Error(w, "cannot record the delivery", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})))
	return mux
}
