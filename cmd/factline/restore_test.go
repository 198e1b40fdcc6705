package main_test

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

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

// TestRestoreDrill: what a gateway wrote on Postgres comes back from a
// pg_dump restored into an empty database, as docs/operations.md says:
// every fact with its seq and global position, and the ledger continues.
func TestRestoreDrill(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir() // the webhook key file, kept with the backup
	src := testutil.Postgres(t)
	key, stderr, code := cli(t, nil, "keys", "create", "--tenant", "acme", "--mode", "live", "--database-url", src, "--data-dir", dataDir)
	key = strings.TrimSpace(key)
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	s := startServer(t, "--database-url", src, "--data-dir", dataDir)
	s.waitReady(t)
	if code, body := s.do(t, "POST", "/v1/entities", key, `{"type":"account","id":"acct-1","name":"Acme","status":"active","subtype":"customer"}`); code != 201 {
		t.Fatalf("create %d %v", code, body)
	}
	for _, amount := range []string{"0.1", "0.2", "0.3"} {
		if code, body := s.do(t, "POST", "/v1/facts", key, `{"entity_id":"acct-1","type":"deposit","data":{"amount":`+amount+`}}`); code != 201 {
			t.Fatalf("fact %d %v", code, body)
		}
	}
	code, before := s.do(t, "GET", "/v1/entities/acct-1/facts?limit=10", key, "")
	if code != 200 {
		t.Fatalf("facts: %d %v", code, before)
	}
	dump := filepath.Join(t.TempDir(), "factline.dump")
	if out, err := exec.Command(pgTool(t, "pg_dump"), "--format=custom", "--file="+dump, src).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	s.stop(t)

	dst := testutil.Postgres(t) // empty: the database as lost
	if out, err := exec.Command(pgTool(t, "pg_restore"), "--no-owner", "--exit-on-error", "--dbname="+dst, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	s = startServer(t, "--database-url", dst, "--data-dir", dataDir, "--migrate=false")
	defer s.stop(t)
	s.waitReady(t)
	code, after := s.do(t, "GET", "/v1/entities/acct-1/facts?limit=10", key, "")
	if code != 200 || !reflect.DeepEqual(before["data"], after["data"]) {
		t.Fatalf("facts after restore: %d\n got %v\nwant %v", code, after["data"], before["data"])
	}
	if code, body := s.do(t, "POST", "/v1/facts", key, `{"entity_id":"acct-1","type":"deposit","data":{"amount":0.4}}`); code != 201 || data(body)["seq"] != float64(4) {
		t.Fatalf("append after restore: %d %v", code, body)
	}
}
