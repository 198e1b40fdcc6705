package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// TestDatabaseOutageIsServiceUnavailable: while PostgreSQL cannot be
// reached, authentication, writes and reads answer a 503 problem with
// Retry-After promptly instead of a 500 or a hang, /health names the
// database, and once it is back requests succeed with nothing lost or
// stored twice.
func TestDatabaseOutageIsServiceUnavailable(t *testing.T) {
	t.Parallel()
	direct := testutil.Postgres(t)
	proxied, px := testutil.ProxyPostgres(t, direct)
	h := setupOn(t, teststore.OpenAt(t, "postgres", proxied))
	t.Cleanup(func() { h.store.Close() })

	id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	deposit := map[string]any{"entity_id": id, "type": "deposit", "subtype": "manual", "data": map[string]any{"amount": 0.1}}
	h.req("POST", "/v1/facts", h.keyA, deposit).wantStatus(t, 201)

	px.SetDown(true)
	for _, tc := range []struct {
		name, method, path, key string
		body                    any
		detail                  string
	}{
		// keyB was never looked up, so no cached principal hides the outage.
		{"auth", "GET", "/v1/entities?entity_type=account", h.keyB, nil, "Authentication is temporarily unavailable"},
		{"append fact", "POST", "/v1/facts", h.keyA, deposit, ""},
		// One statement that commits by itself: sent on a pooled
		// connection the outage cut, it may have been stored for all the
		// client can tell (in doubt); refused before it was sent, not.
		{"create entity", "POST", "/v1/entities", h.keyA, validAccount, "either"},
		{"get entity", "GET", "/v1/entities/acct-never-read?entity_type=account", h.keyA, nil, ""},
		{"list entities", "GET", "/v1/entities?entity_type=account", h.keyA, nil, ""},
		{"list facts", "GET", "/v1/entities/" + id + "/facts", h.keyA, nil, ""},
	} {
		start := time.Now()
		r := h.req(tc.method, tc.path, tc.key, tc.body)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: answered after %v", tc.name, took)
		}
		detail := tc.detail
		if detail == "" || detail == "either" && !strings.Contains(string(r.raw), "may or may not be stored") {
			detail = "The database is not answering; retry in a few seconds"
		} else if detail == "either" {
			detail = "The database did not confirm the write, so it may or may not be stored; check whether it was before sending it again"
		}
		r.wantProblem(t, 503, "unavailable", "Service Unavailable", detail)
		if ra := r.header.Get("Retry-After"); ra != "5" {
			t.Errorf("%s: Retry-After %q, want 5", tc.name, ra)
		}
	}
	r := h.req("GET", "/health", "", nil)
	r.wantProblem(t, 503, "unavailable", "Service Unavailable", "Unhealthy: [store]; down: database")

	px.SetDown(false)
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		r := h.req("POST", "/v1/facts", h.keyA, deposit)
		if r.status != 201 && r.status != 503 {
			t.Fatalf("after the outage: %d %s", r.status, r.raw)
		}
		if r.status != 201 {
			return fmt.Errorf("after the outage: %d %s", r.status, r.raw)
		}
		return nil
	})
	d := h.req("GET", "/health", "", nil).wantStatus(t, 200).data()
	if deps, _ := d["dependencies"].(map[string]any); deps["database"] != "up" {
		t.Errorf("health dependencies %v", d["dependencies"])
	}
	h.req("GET", "/v1/entities?entity_type=account", h.keyB, nil).wantStatus(t, 200)
	facts := h.req("GET", "/v1/entities/"+id+"/facts", h.keyA, nil).wantStatus(t, 200).data()
	items, _ := facts["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("facts after the outage: %d, want 2 (one before, one after): %v", len(items), items)
	}
	ent := h.req("GET", "/v1/entities/"+id+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()
	if v := ent["version"]; v != json.Number("3") {
		t.Errorf("entity version %v, want 3", v)
	}
}

// TestDatabaseThatTakesNoWritesIsServiceUnavailable: a database that
// answers but takes no writes (read-only after a failover, commits
// waiting for a standby that is gone) is a 503 for writes, with reads
// still served, and /health names the database; before, writes were a
// 500 and /health stayed green.
func TestDatabaseThatTakesNoWritesIsServiceUnavailable(t *testing.T) {
	t.Parallel()
	url := testutil.Postgres(t)
	// The server commits without waiting (synchronous_commit=off,
	// testutil); the store's sessions wait as a production server's do,
	// so a synchronous standby named later holds their commits.
	h := setupOn(t, teststore.OpenAt(t, "postgres", testutil.WithSetting(url, "synchronous_commit", "on")))
	t.Cleanup(func() { h.store.Close() })
	exec := testutil.PostgresExec(t, url)
	// A setting of this test's database, whatever its name.
	setDB := func(setting string) {
		exec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I ` + setting + `', current_database()); END $$`)
	}
	// Settings of the database reach new sessions only: end the store's.
	reconnect := func() {
		exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	}
	// Ending its sessions also ends the stall guard's, which reports the
	// database down until it connects again (a second at most).
	eventually := func(method, path, key string, body any, status int, contains string) {
		t.Helper()
		testutil.EventuallyNil(t, 30*time.Second, func() error {
			r := h.req(method, path, key, body)
			if r.status != status || !strings.Contains(string(r.raw), contains) {
				return fmt.Errorf("%s %s: %d %s", method, path, r.status, r.raw)
			}
			return nil
		})
	}

	id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	deposit := map[string]any{"entity_id": id, "type": "deposit", "subtype": "manual", "data": map[string]any{"amount": 0.1}}

	t.Run("read-only", func(t *testing.T) {
		setDB("SET default_transaction_read_only = on")
		reconnect()
		testutil.EventuallyNil(t, 30*time.Second, func() error {
			r := h.req("POST", "/v1/facts", h.keyA, deposit)
			if r.status == 201 {
				t.Fatalf("a read-only database stored a fact: %s", r.raw)
			}
			if r.status != 503 || !strings.Contains(string(r.raw), "takes no writes now") {
				return fmt.Errorf("append: %d %s", r.status, r.raw)
			}
			return nil
		})
		eventually("GET", "/v1/entities/"+id+"/facts", h.keyA, nil, 200, "")
		eventually("GET", "/health", "", nil, 503, "Unhealthy: [store]; down: database")

		setDB("RESET default_transaction_read_only")
		reconnect()
		eventually("POST", "/v1/facts", h.keyA, deposit, 201, "")
		eventually("GET", "/health", "", nil, 200, `"database":"up"`)
	})

	t.Run("commits wait for a standby that is gone", func(t *testing.T) {
		// Only the store's sessions wait (synchronous_commit=on above);
		// the server's other databases commit without waiting.
		exec(`ALTER SYSTEM SET synchronous_standby_names = 'factline_gone'`)
		t.Cleanup(func() {
			exec(`ALTER SYSTEM RESET synchronous_standby_names`)
			exec(`SELECT pg_reload_conf()`)
		})
		exec(`SELECT pg_reload_conf()`)
		eventually("GET", "/v1/entities/"+id+"/facts", h.keyA, nil, 200, "")
		// Reads are served; the check fails once the setting has reached
		// the server's processes and the last probe's answer (a second at
		// most) has aged out, and it answers promptly.
		testutil.EventuallyNil(t, 30*time.Second, func() error {
			start := time.Now()
			r := h.req("GET", "/health", "", nil)
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("/health answered after %v", took)
			}
			if r.status != 503 || !strings.Contains(string(r.raw), "down: database") {
				return fmt.Errorf("health: %d %s", r.status, r.raw)
			}
			return nil
		})
		eventually("GET", "/v1/entities/"+id+"/facts", h.keyA, nil, 200, "")
	})
}
