package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ledger"
)

func TestOversizedCommandInputIsRefusedBeforeThePlugin(t *testing.T) {
	t.Parallel()
	manyKeys := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"amount":1`)
		for i := range n {
			fmt.Fprintf(&b, `,"k%d":%d`, i, i)
		}
		return b.String() + "}"
	}
	deep := func(n int) string {
		return `{"amount":1,"x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}"
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			l := &countingLedger{}
			h := setupLedgers(t, backend, ledger.Static{"account": l})
			// The harness's BodyLimit is 64 KiB; the command bound must
			// hold under a larger transport limit too.
			srv, err := gateway.New(gateway.Config{DocsURL: docsURL, BodyLimit: 4 << 20}, h.deps)
			if err != nil {
				t.Fatal(err)
			}
			h.srv = srv
			ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
			path := "/v1/entities/" + ent + "/deposit"
			h.req("POST", path, h.keyA, manyKeys(gateway.CommandInputKeys-1)).wantStatus(t, 201)
			h.req("POST", path, h.keyA, deep(gateway.CommandInputDepth)).wantStatus(t, 201)
			if n := l.decides.Load(); n != 2 {
				t.Fatalf("ledger decided %d times for 2 accepted commands", n)
			}
			before := h.stored(ent)
			for _, tc := range []struct {
				name, body    string
				status        int
				slug, title   string
				detail, field string
			}{
				{"1 MB string", `{"amount":1,"note":"` + strings.Repeat("x", 1_000_000) + `"}`, 413, "payload-too-large", "Payload Too Large",
					fmt.Sprintf("Command input exceeds the limit of %d bytes", gateway.CommandInputLimit), ""},
				{"10,000 keys", manyKeys(10_000), 400, "bad-request", "Bad Request",
					fmt.Sprintf("Command input has more than %d keys", gateway.CommandInputKeys), ""},
				{"1,001 keys", manyKeys(gateway.CommandInputKeys + 1), 400, "bad-request", "Bad Request",
					fmt.Sprintf("Command input has more than %d keys", gateway.CommandInputKeys), ""},
				{"too deep", deep(gateway.CommandInputDepth + 1), 400, "bad-request", "Bad Request",
					fmt.Sprintf("Command input nests deeper than %d levels", gateway.CommandInputDepth), ""},
			} {
				start := time.Now()
				r := h.req("POST", path, h.keyA, tc.body)
				r.wantProblem(t, tc.status, tc.slug, tc.title, tc.detail)
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("%s: refused after %v", tc.name, d)
				}
			}
			if n := l.decides.Load(); n != 2 {
				t.Fatalf("ledger called %d times, want the 2 accepted commands only", n)
			}
			if after := h.stored(ent); after != before {
				t.Fatalf("refused commands changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestUnknownEntityTypeOnCommandRouteIsA400: a command route learns the
// entity type from the stored entity or from ?entity_type=; a type the
// domain does not declare is the contract's 400 "Unknown entity type",
// whether or not the entity exists, and the ledger is never called.
func TestUnknownEntityTypeOnCommandRouteIsA400(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			l := &countingLedger{}
			h := setupLedgers(t, backend, ledger.Static{"account": l})
			ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
			for _, tc := range []struct {
				name, method, path string
				status             int
				slug, title        string
				detail             string
			}{
				{"missing entity, unknown type", "POST", "/v1/entities/m1/earn?entity_type=member", 400, "bad-request", "Bad Request", "Unknown entity type: member"},
				{"missing entity, unknown type, read", "GET", "/v1/entities/m1/points?entity_type=member", 400, "bad-request", "Bad Request", "Unknown entity type: member"},
				{"existing entity, unknown type", "POST", "/v1/entities/" + ent + "/deposit?entity_type=member", 400, "bad-request", "Bad Request", "Unknown entity type: member"},
				{"missing entity, known type", "POST", "/v1/entities/m1/deposit?entity_type=account", 404, "not-found", "Not Found", "Entity m1 not found"},
				{"missing entity, no type", "POST", "/v1/entities/m1/earn", 404, "not-found", "Not Found", "Entity m1 not found"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var body any
					if tc.method == "POST" {
						body = `{"points":5}`
					}
					h.req(tc.method, tc.path, h.keyA, body).wantProblem(t, tc.status, tc.slug, tc.title, tc.detail)
				})
			}
			// The hint is not part of the command's input, and a matching
			// one runs the command.
			h.req("POST", "/v1/entities/"+ent+"/deposit?entity_type=account", h.keyA, `{"amount":1}`).wantStatus(t, 201)
			if n := l.decides.Load(); n != 1 {
				t.Fatalf("ledger decided %d times, want only the accepted command", n)
			}
		})
	}
}
