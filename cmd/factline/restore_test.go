package main_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/testutil"
)

// pgTool finds a PostgreSQL client program beside the newest installed
// server, as testutil finds the server, else on the PATH.
func pgTool(t *testing.T, name string) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if p := filepath.Join(dirs[i], name); exec.Command(p, "--version").Run() == nil {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: install the PostgreSQL client binaries: %v", name, err)
	}
	return p
}

// receiver is an HTTPS webhook receiver that refuses (503) until open,
// then counts each delivery id it accepts.
type receiver struct {
	srv    *httptest.Server
	caFile string
	open   atomic.Bool
	mu     sync.Mutex
	got    map[string]int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string]int{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.open.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.mu.Lock()
		r.got[req.Header.Get("X-Svc-Delivery-Id")]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	// The gateway trusts the receiver's certificate through SSL_CERT_FILE.
	r.caFile = filepath.Join(t.TempDir(), "receiver-ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *receiver) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.got))
	for k, v := range r.got {
		out[k] = v
	}
	return out
}

// items lists data.items of a list answer.
func items(t *testing.T, code int, body map[string]any) []map[string]any {
	t.Helper()
	if code != 200 {
		t.Fatalf("list: %d %v", code, body)
	}
	raw, _ := data(body)["items"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, it := range raw {
		out = append(out, it.(map[string]any))
	}
	return out
}

// waitFor polls cond until it holds or 90 s pass; what describes the
// last state seen.
func waitFor(t *testing.T, s *server, what string, cond func() (bool, string)) {
	t.Helper()
	testutil.EventuallyNil(t, 90*time.Second, func() error {
		if ok, last := cond(); !ok {
			return fmt.Errorf("%s: not yet; last: %s\n%s", what, last, s.stderr)
		}
		return nil
	})
}

// dropAndCreate drops the database of dbURL (as lost) and creates it
// again empty, through the server's maintenance database.
func dropAndCreate(t *testing.T, dbURL string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	for _, q := range []string{"DROP DATABASE " + ident + " WITH (FORCE)", "CREATE DATABASE " + ident} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

const drillProjection = `{"type":"projection","name":"deposits_by_hour","settings":{"source":"account","factTypes":["deposit"],
 "timeWindow":"hour","groupBy":["data.currency"],"materialize":true,"storageVersion":2,
 "aggregations":[{"field":"count","function":"count"},{"field":"data.amount","function":"sum"}]}}`

// TestRestoreDrill: what gateways wrote on Postgres and Redis comes back
// from a pg_dump restored after the database is dropped and Redis is
// flushed, as docs/operations.md says: every fact with its seq and global
// position, projections rebuilt to the same answers with no manual step,
// and the webhook deliveries pending at backup time delivered to the
// receiver once it is up, each delivery id exactly once.
func TestRestoreDrill(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir() // the webhook key file, kept with the backup
	db := testutil.Postgres(t)
	redisURL := testutil.Redis(t)
	rcv := newReceiver(t)
	serve := func(extra ...string) *server {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--domain", domainManifest(t), "--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache,
			"--database-url", db, "--redis-url", redisURL, "--data-dir", dataDir, "--webhook-allow-networks", "127.0.0.1/32"}, extra...)
		s := startProcessEnv(t, []string{"SSL_CERT_FILE=" + rcv.caFile}, args)
		s.waitReady(t)
		return s
	}
	newKey := func(mode string) string {
		key, stderr, code := cli(t, nil, "keys", "create", "--tenant", "acme", "--mode", mode, "--database-url", db, "--data-dir", dataDir)
		if code != 0 {
			t.Fatalf("keys create: %d %s", code, stderr)
		}
		return strings.TrimSpace(key)
	}
	key, admin := newKey("live"), newKey("admin")
	s := serve()

	// Before the backup: facts, a projection with data, two webhook
	// configs whose receiver refuses, so their deliveries stay pending.
	// A delivery under attempt when the dump is taken stays leased after
	// the restore, for twice its timeout plus 30 s: a 5 s timeout keeps
	// that within the wait for the pending deliveries below.
	if code, body := s.do(t, "POST", "/v1/entities", key, `{"type":"account","id":"acct-1","name":"Acme","status":"active","subtype":"customer"}`); code != 201 {
		t.Fatalf("create %d %v", code, body)
	}
	if code, body := s.do(t, "POST", "/v1/configs", key, drillProjection); code != 201 {
		t.Fatalf("projection config: %d %v", code, body)
	}
	code, sec := s.do(t, "POST", "/v1/admin/webhooks/secrets", admin, "")
	if code != 201 {
		t.Fatalf("secret: %d %v", code, sec)
	}
	for _, name := range []string{"ledger", "audit"} {
		cfg := fmt.Sprintf(`{"type":"webhook","name":%q,"scope_type":"account","scope_id":"acme","settings":{"url":%q,"secret_ref":%q,
 "triggers":["deposit.manual"],"retry":{"max_attempts":20,"backoff_base_seconds":5,"backoff_max_seconds":10,"timeout_seconds":5}}}`,
			name, rcv.srv.URL+"/hook/"+name, data(sec)["secret_ref"])
		if code, body := s.do(t, "POST", "/v1/configs", key, cfg); code != 201 {
			t.Fatalf("webhook config: %d %v", code, body)
		}
	}
	for _, amount := range []string{"0.1", "0.2", "0.3"} {
		body := fmt.Sprintf(`{"entity_id":"acct-1","type":"deposit","subtype":"manual","data":{"amount":%s,"currency":"EUR"}}`, amount)
		if code, body := s.do(t, "POST", "/v1/facts", key, body); code != 201 {
			t.Fatalf("fact %d %v", code, body)
		}
	}
	code, before := s.do(t, "GET", "/v1/entities/acct-1/facts?limit=10", key, "")
	if code != 200 {
		t.Fatalf("facts: %d %v", code, before)
	}
	for _, f := range items(t, code, before) {
		if f["seq"] == nil || f["position"] == nil {
			t.Fatalf("fact without seq or position: %v", f)
		}
	}
	queries := []string{`{"filters":{"aggregate":true}}`, `{}`}
	materialized := func(s *server, q string) (bool, any, string) {
		code, body := s.do(t, "POST", "/v1/projections/deposits_by_hour/query", key, q)
		meta, _ := data(body)["_meta"].(map[string]any)
		ok := code == 200 && meta["ready"] == true && meta["mode"] == "materialized"
		return ok, data(body)["results"], fmt.Sprint(code, body)
	}
	var answers []any
	for _, q := range queries {
		waitFor(t, s, "projection caught up before the backup", func() (bool, string) {
			ok, res, last := materialized(s, q)
			if ok && len(answers) == 0 {
				rows, _ := res.([]any)
				sum, _ := rows[0].(map[string]any)["count"].(float64)
				ok = sum == 3
			}
			if ok {
				answers = append(answers, res)
			}
			return ok, last
		})
	}
	var pending []string
	waitFor(t, s, "six deliveries pending after a refused attempt", func() (bool, string) {
		code, body := s.do(t, "GET", "/v1/admin/webhooks/deliveries?limit=100", admin, "")
		pending = pending[:0]
		for _, d := range items(t, code, body) {
			if d["status"] == "pending" && d["attempt"].(float64) >= 1 {
				pending = append(pending, d["delivery_id"].(string))
			}
		}
		return len(pending) == 6, fmt.Sprint(body)
	})

	dump := filepath.Join(t.TempDir(), "factline.dump")
	if out, err := exec.Command(pgTool(t, "pg_dump"), "--format=custom", "--file="+dump, db).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	s.stop(t)

	// The loss: the database dropped, Redis flushed (FLUSHDB: the test's
	// logical database is all this gateway's Redis holds).
	dropAndCreate(t, db)
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(pgTool(t, "pg_restore"), "--no-owner", "--exit-on-error", "--dbname="+db, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	rcv.open.Store(true)
	s = serve("--migrate=false")
	defer s.stop(t)

	code, after := s.do(t, "GET", "/v1/entities/acct-1/facts?limit=10", key, "")
	if code != 200 || !reflect.DeepEqual(before["data"], after["data"]) {
		t.Fatalf("facts after restore: %d\n got %v\nwant %v", code, after["data"], before["data"])
	}
	for i, q := range queries {
		waitFor(t, s, "projection rebuilt to the same answer "+q, func() (bool, string) {
			ok, res, last := materialized(s, q)
			return ok && reflect.DeepEqual(res, answers[i]), fmt.Sprintf("%s\nwant %v", last, answers[i])
		})
	}
	waitFor(t, s, "every pending delivery sent", func() (bool, string) {
		code, body := s.do(t, "GET", "/v1/admin/webhooks/deliveries?status=pending&limit=100", admin, "")
		return len(items(t, code, body)) == 0, fmt.Sprint(body)
	})
	got := rcv.counts()
	for _, id := range pending {
		if got[id] != 1 {
			t.Errorf("delivery %s received %d times, want once", id, got[id])
		}
	}
	if len(got) != len(pending) {
		t.Errorf("receiver got %v, want exactly the pending deliveries %v", got, pending)
	}
	if code, body := s.do(t, "POST", "/v1/facts", key, `{"entity_id":"acct-1","type":"deposit","data":{"amount":0.4,"currency":"EUR"}}`); code != 201 || data(body)["seq"] != float64(4) {
		t.Fatalf("append after restore: %d %v", code, body)
	}
}
