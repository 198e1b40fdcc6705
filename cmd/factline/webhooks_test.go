package main_test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestWebhooksCLI: factline webhooks dead-letters, replay, pause and
// resume on the embedded store of a running gateway (found through
// FACTLINE_DATA_DIR, as every flag falls back to FACTLINE_<FLAG>); the
// gateway delivers what the command line replayed once the config is
// resumed.
func TestWebhooksCLI(t *testing.T) {
	t.Parallel()
	dir := newStore(t)
	var status atomic.Int32
	status.Store(http.StatusGone) // a 410 kills the delivery and pauses the config
	rcv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(rcv.Close)
	caFile := filepath.Join(t.TempDir(), "receiver-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rcv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"FACTLINE_DATA_DIR=" + dir}
	newKey := func(mode string) string {
		key, stderr, code := cli(t, env, "keys", "create", "--tenant", "acme", "--mode", mode)
		if code != 0 {
			t.Fatalf("keys create: %d %s", code, stderr)
		}
		return strings.TrimSpace(key)
	}
	key, admin := newKey("live"), newKey("admin")
	s := startProcessEnv(t, append([]string{"SSL_CERT_FILE=" + caFile}, env...), []string{"serve", "--addr", "127.0.0.1:0",
		"--domain", domainManifest(t), "--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache, "--webhook-allow-networks", "127.0.0.1/32"})
	defer s.stop(t)
	s.waitReady(t)

	if code, body := s.do(t, "POST", "/v1/entities", key, `{"type":"account","id":"acct-1","name":"Acme","status":"active","subtype":"customer"}`); code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	code, sec := s.do(t, "POST", "/v1/admin/webhooks/secrets", admin, "")
	if code != 201 {
		t.Fatalf("secret: %d %v", code, sec)
	}
	code, cfg := s.do(t, "POST", "/v1/configs", key, fmt.Sprintf(`{"type":"webhook","name":"ledger","scope_type":"account","scope_id":"acme",
 "settings":{"url":%q,"secret_ref":%q,"triggers":["deposit.manual"]}}`, rcv.URL+"/hook", data(sec)["secret_ref"]))
	if code != 201 {
		t.Fatalf("webhook config: %d %v", code, cfg)
	}
	cfgID := data(cfg)["id"].(string)
	if code, body := s.do(t, "POST", "/v1/facts", key, `{"entity_id":"acct-1","type":"deposit","subtype":"manual","data":{"amount":0.1,"currency":"EUR"}}`); code != 201 {
		t.Fatalf("fact: %d %v", code, body)
	}
	delivery := func(want string) string {
		var id string
		waitFor(t, s, "a "+want+" delivery", func() (bool, string) {
			code, body := s.do(t, "GET", "/v1/admin/webhooks/deliveries?status="+want, admin, "")
			its := items(t, code, body)
			if len(its) == 1 {
				id = its[0]["delivery_id"].(string)
			}
			return id != "", fmt.Sprint(body)
		})
		return id
	}
	id := delivery("dead")

	run := func(args ...string) (string, string, int) {
		t.Helper()
		return cli(t, env, append([]string{"webhooks"}, args...)...)
	}
	if out, stderr, code := run("dead-letters", "--tenant", "acme"); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "GONE") {
		t.Fatalf("dead-letters: %d\n%s%s", code, out, stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"replay without ids or --all", []string{"replay", "--tenant", "acme"}, 2, "give delivery ids or --all"},
		{"replay without --tenant", []string{"replay"}, 2, "--tenant is required"},
		{"replay of an unknown delivery", []string{"replay", "--tenant", "acme", "del_nope"}, 1, "del_nope: Delivery del_nope not found"},
		{"pause of an unknown config", []string{"pause", "--tenant", "acme", "cfg_nope"}, 1, "webhook config cfg_nope not found"},
		{"pause without a config id", []string{"pause", "--tenant", "acme"}, 2, "pause: give one config id"},
		{"unknown command", []string{"nope"}, 2, "Usage: factline webhooks"},
		{"no command", nil, 2, "a command is required"},
		{"help", []string{"-h"}, 0, "Usage: factline webhooks"},
		{"bad flag", []string{"replay", "--no-such-flag"}, 2, "flag provided but not defined"},
	} {
		if out, stderr, code := run(tc.args...); code != tc.code || !strings.Contains(out+stderr, tc.want) {
			t.Errorf("%s: exit %d (want %d)\n%s%s\nwant it to contain %q", tc.name, code, tc.code, out, stderr, tc.want)
		}
	}
	if out, stderr, code := run("replay", "--tenant", "acme", "--all"); code != 0 || !strings.Contains(out, "replayed "+id) || !strings.Contains(out, "config paused") {
		t.Fatalf("replay --all: %d\n%s%s", code, out, stderr)
	}
	status.Store(http.StatusOK)
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"resume", "--tenant", "acme", cfgID}, 0, "resumed " + cfgID},
		{[]string{"resume", "--tenant", "acme", cfgID}, 1, "is not paused"},
		{[]string{"pause", "--tenant", "acme", cfgID}, 0, "paused " + cfgID},
		{[]string{"pause", "--tenant", "acme", cfgID}, 1, "is paused already"},
	}
	for _, st := range steps {
		if out, stderr, code := run(st.args...); code != st.code || !strings.Contains(out+stderr, st.want) {
			t.Fatalf("%v: exit %d (want %d)\n%s%s\nwant it to contain %q", st.args, code, st.code, out, stderr, st.want)
		}
	}
	code, paused := s.do(t, "GET", "/v1/admin/webhooks/paused", admin, "")
	if ps := items(t, code, paused); len(ps) != 1 || ps[0]["config_id"] != cfgID || ps[0]["reason"] != "paused by an admin" {
		t.Fatalf("paused configs after the command line's pause: %v", paused)
	}
	if out, stderr, code := run("resume", "--tenant", "acme", cfgID); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume after pause: %d %s%s", code, out, stderr)
	}
	if got := delivery("sent"); got != id {
		t.Fatalf("sent delivery %s, want the replayed %s", got, id)
	}
}
