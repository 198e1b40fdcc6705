package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/testutil"
)

// accountDir is the account plugin's source, built at other versions by
// buildVersion.
const accountDir = "../../../plugins/account"

// listedVersions is the version l serves of plugin name and the previous
// version it lists ("" for none).
func listedVersions(l *live, name string) (version, previous string) {
	l.t.Helper()
	code, body := l.call("GET", "/v1/admin/plugins", l.op, nil)
	if code != 200 {
		l.t.Fatalf("list plugins: %d %v", code, body)
	}
	items, _ := dataOf(body)["items"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		if m["name"] == name {
			prev, _ := m["previous"].(string)
			return fmt.Sprint(m["version"]), prev
		}
	}
	l.t.Fatalf("plugin %s not listed: %v", name, body)
	return "", ""
}

// storedActive is the SHA-256 of plugin name's active version in l's
// store and of the version before it.
func storedActive(l *live, name string) (active, previous string) {
	l.t.Helper()
	act, err := l.a.Store.ActivePlugins(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	for _, a := range act {
		if a.Name == name {
			return a.SHA256, a.Previous
		}
	}
	l.t.Fatalf("plugin %s has no active version in the store: %+v", name, act)
	return "", ""
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestPluginChangesWhileTheDatabaseIsDown: with Postgres unreachable, an
// install and a rollback answer 503 unavailable with Retry-After and no
// driver text, and leave the process's versions as they were: once the
// database is back it lists the same current and previous versions, and
// a rollback restores the previous one. Both answered a 422 quoting
// pgx's error (user, database, address), and the install swapped its
// version in before storing it: the process then listed the version
// never stored as the previous one, and every rollback there answered
// 422 "not found" until the next install or a restart.
func TestPluginChangesWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	direct := testutil.Postgres(t)
	proxied, px := testutil.ProxyPostgres(t, direct)
	v1 := repoPlugins(t)["account"]
	v2 := buildVersion(t, accountDir, "2.0.0")
	v3 := buildVersion(t, accountDir, "3.0.0")
	l := startLive(t, "postgres", proxied)
	if code, body := l.call("PUT", "/v1/admin/plugins/account", l.op, v2); code != 201 {
		t.Fatalf("install 2.0.0: %d %v", code, body)
	}
	if v, prev := listedVersions(l, "account"); v != "2.0.0" || prev != "1.0.0" {
		t.Fatalf("before the outage: serving %q, previous %q", v, prev)
	}
	// A key looked up now authenticates from the cache (auth.CacheTTL)
	// through the outage, so the 503s below are the plugin endpoints'.
	l.op = l.newKey("operator", "admin")
	listedVersions(l, "account")

	px.SetDown(true)
	// What the driver's text would give away.
	var secrets []string
	for _, raw := range []string{direct, proxied} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, u.Host, strings.TrimPrefix(u.Path, "/"), u.User.Username())
	}
	secrets = append(secrets, "dial", "pgx", "connect", "refused")
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"install", "PUT", "/v1/admin/plugins/account", v3},
		{"rollback", "POST", "/v1/admin/plugins/account/rollback", nil},
	} {
		code, hdr, body := l.callHeader(tc.method, tc.path, l.op, tc.body)
		raw, _ := json.Marshal(body)
		if code != 503 || hdr.Get("Retry-After") != "5" || body["detail"] != "The database is not answering; retry in a few seconds" || body["errors"] != nil {
			t.Fatalf("%s with the database down: %d Retry-After %q %s", tc.name, code, hdr.Get("Retry-After"), raw)
		}
		// The request id, random, is no driver text.
		delete(body, "instance")
		delete(body, "trace_id")
		text, _ := json.Marshal(body)
		for _, s := range secrets {
			if s != "" && strings.Contains(strings.ToLower(string(text)), strings.ToLower(s)) {
				t.Errorf("%s with the database down: the answer gives away %q: %s", tc.name, s, raw)
			}
		}
	}
	if v, prev := listedVersions(l, "account"); v != "2.0.0" || prev != "1.0.0" {
		t.Fatalf("during the outage, after the failed install and rollback: serving %q, previous %q; want 2.0.0 and 1.0.0", v, prev)
	}

	px.SetDown(false)
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if code, body := l.call("GET", "/health", "", nil); code != 200 {
			return fmt.Errorf("health after the outage: %d %v", code, body)
		}
		return nil
	})
	if v, prev := listedVersions(l, "account"); v != "2.0.0" || prev != "1.0.0" {
		t.Fatalf("after the outage: serving %q, previous %q; want 2.0.0 and 1.0.0", v, prev)
	}
	code, body := l.call("POST", "/v1/admin/plugins/account/rollback", l.op, nil)
	if code != 200 || dataOf(body)["version"] != "1.0.0" {
		t.Fatalf("rollback after the outage: %d %v", code, body)
	}
	if act, prev := storedActive(l, "account"); act != sha256Hex(v1) || prev != sha256Hex(v2) {
		t.Fatalf("stored after the rollback: active %.12s, previous %.12s; want 1.0.0 then 2.0.0", act, prev)
	}
}

// TestOverlappingPluginInstallsAgreeOnThePrevious: installs of two
// versions through two processes, the second made by a process that has
// not loaded the first, leave both processes listing the store's
// previous version, and a rollback through either restores it. Each
// process took the version it replaced itself as the previous one: the
// second listed, and rolled back to, the version before both installs,
// while the store and the first process named the first install's.
func TestOverlappingPluginInstallsAgreeOnThePrevious(t *testing.T) {
	t.Parallel()
	pg := testutil.Postgres(t)
	v2 := buildVersion(t, accountDir, "1.1.1")
	v3 := buildVersion(t, accountDir, "1.1.2")
	a := startLive(t, "postgres", pg)
	// b loads the store's versions at its start and afterwards only when
	// the test says so (Plugins.Sync): its install below starts from a
	// process that has not loaded a's, without a race against its poll.
	b := startLive(t, "postgres", pg, func(c *app.Config) { c.PluginPoll = time.Hour })
	want := func(step string, l *live, version, previous string) {
		t.Helper()
		if v, prev := listedVersions(l, "account"); v != version || prev != previous {
			t.Errorf("%s: serving %q, previous %q; want %q, %q", step, v, prev, version, previous)
		}
	}
	wantStored := func(step string, active, previous []byte) {
		t.Helper()
		if act, prev := storedActive(a, "account"); act != sha256Hex(active) || prev != sha256Hex(previous) {
			t.Fatalf("%s: stored active %.12s, previous %.12s; want %.12s, %.12s", step, act, prev, sha256Hex(active), sha256Hex(previous))
		}
	}
	// serves waits for a's poll to load the store's active version.
	serves := func(version string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, "process a to serve "+version, func() bool {
			v, _ := listedVersions(a, "account")
			return v == version
		})
	}

	if code, body := a.call("PUT", "/v1/admin/plugins/account", a.op, v2); code != 201 {
		t.Fatalf("install 1.1.1 through a: %d %v", code, body)
	}
	if v, _ := listedVersions(b, "account"); v != "1.0.0" {
		t.Fatalf("b loaded a's install before its own: serving %q; the test proves nothing", v)
	}
	if code, body := b.call("PUT", "/v1/admin/plugins/account", b.op, v3); code != 201 {
		t.Fatalf("install 1.1.2 through b: %d %v", code, body)
	}
	wantStored("after the installs", v3, v2)
	want("b after its install", b, "1.1.2", "1.1.1")
	serves("1.1.2")
	want("a once it follows", a, "1.1.2", "1.1.1")

	code, body := b.call("POST", "/v1/admin/plugins/account/rollback", b.op, nil)
	if code != 200 || dataOf(body)["version"] != "1.1.1" {
		t.Fatalf("rollback through b: %d %v; want 1.1.1, the store's previous version", code, body)
	}
	wantStored("after the rollback through b", v2, v3)
	want("b after its rollback", b, "1.1.1", "1.1.2")
	serves("1.1.1")
	want("a once it follows the rollback", a, "1.1.1", "1.1.2")

	code, body = a.call("POST", "/v1/admin/plugins/account/rollback", a.op, nil)
	if code != 200 || dataOf(body)["version"] != "1.1.2" {
		t.Fatalf("rollback through a: %d %v; want 1.1.2, the store's previous version", code, body)
	}
	wantStored("after the rollback through a", v3, v2)
	if err := b.a.Plugins.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want("b once it follows", b, "1.1.2", "1.1.1")
}

// TestPluginInstallAnswersWhatTheStoreDid: an install answers 200 exactly
// when the store's active version was already those bytes and 201 when
// it changed, whatever the answering process served. b, following the
// store only when told, answered from its own registry: 200 for the
// version it served though the store went back to it from a's install,
// and 201 for a's version though the store did not change.
func TestPluginInstallAnswersWhatTheStoreDid(t *testing.T) {
	t.Parallel()
	pg := testutil.Postgres(t)
	v2 := buildVersion(t, accountDir, "1.2.2")
	v3 := buildVersion(t, accountDir, "1.2.3")
	v4 := buildVersion(t, accountDir, "1.2.4")
	a := startLive(t, "postgres", pg)
	b := startLive(t, "postgres", pg, func(c *app.Config) { c.PluginPoll = time.Hour })
	install := func(step string, l *live, module []byte, want int) {
		t.Helper()
		if code, body := l.call("PUT", "/v1/admin/plugins/account", l.op, module); code != want {
			t.Fatalf("%s: %d %v, want %d", step, code, body, want)
		}
	}
	wantStored := func(step string, active, previous []byte) {
		t.Helper()
		if act, prev := storedActive(a, "account"); act != sha256Hex(active) || prev != sha256Hex(previous) {
			t.Fatalf("%s: stored active %.12s, previous %.12s; want %.12s, %.12s", step, act, prev, sha256Hex(active), sha256Hex(previous))
		}
	}

	install("1.2.3 through a", a, v3, 201)
	if err := b.a.Plugins.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	install("1.2.4 through a", a, v4, 201)
	if v, _ := listedVersions(b, "account"); v != "1.2.3" {
		t.Fatalf("b loaded a's install: serving %q; the test proves nothing", v)
	}
	// b serves 1.2.3 already; the store goes back to it from 1.2.4.
	install("1.2.3 through b, which serves it, after a's 1.2.4", b, v3, 201)
	wantStored("after b's install", v3, v4)

	install("1.2.2 through a", a, v2, 201)
	// b has not loaded 1.2.2; the store has it active already.
	install("1.2.2 through b, right after a", b, v2, 200)
	wantStored("after the same version through both", v2, v3)
	install("1.2.2 through a again", a, v2, 200)
}

// TestPluginRollbackOverlappingAnInstallConflicts: a rollback through b
// that read the store's versions before a's install activated its
// version, and activates after it, answers 409 and leaves the install in
// place. It answered 200 and restored the version before the one it read:
// the install was undone silently, and the store then named it as the
// version to roll back to. The test holds the store's per-plugin
// activation lock (the advisory lock ActivatePlugin takes) while a's
// install and then b's rollback, its read done, queue on it; released,
// Postgres grants it in that order.
func TestPluginRollbackOverlappingAnInstallConflicts(t *testing.T) {
	t.Parallel()
	pg := testutil.Postgres(t)
	v2 := buildVersion(t, accountDir, "1.3.2")
	v3 := buildVersion(t, accountDir, "1.3.3")
	v4 := buildVersion(t, accountDir, "1.3.4")
	a := startLive(t, "postgres", pg)
	b := startLive(t, "postgres", pg, func(c *app.Config) { c.PluginPoll = time.Hour })
	for _, v := range [][]byte{v4, v3} {
		if code, body := a.call("PUT", "/v1/admin/plugins/account", a.op, v); code != 201 {
			t.Fatalf("install through a: %d %v", code, body)
		}
	}
	if err := b.a.Plugins.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const key = `hashtextextended('factline.plugin_active:account', 0)`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock(`+key+`)`); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()
	waiting := func(n int, what string) {
		t.Helper()
		testutil.Eventually(t, 2*time.Minute, what, func() bool {
			var got int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
AND ((classid::bigint << 32) | objid::bigint) = `+key).Scan(&got)
			return err == nil && got >= n
		})
	}
	type answer struct {
		code int
		body map[string]any
	}
	installed, rolledBack := make(chan answer, 1), make(chan answer, 1)
	go func() {
		code, body := a.call("PUT", "/v1/admin/plugins/account", a.op, v2)
		installed <- answer{code, body}
	}()
	waiting(1, "a's install to wait for the activation lock")
	go func() {
		code, body := b.call("POST", "/v1/admin/plugins/account/rollback", b.op, nil)
		rolledBack <- answer{code, body}
	}()
	waiting(2, "b's rollback to wait for the activation lock")
	unlock()

	if ans := <-installed; ans.code != 201 {
		t.Fatalf("install 1.3.2 through a: %d %v", ans.code, ans.body)
	}
	if ans := <-rolledBack; ans.code != 409 {
		t.Errorf("rollback through b overlapping a's install: %d %v; want 409", ans.code, ans.body)
	}
	if act, prev := storedActive(a, "account"); act != sha256Hex(v2) || prev != sha256Hex(v3) {
		t.Fatalf("stored after the overlap: active %.12s, previous %.12s; want a's install (1.3.2), 1.3.3 before it", act, prev)
	}
	if v, prev := listedVersions(b, "account"); v != "1.3.3" || prev != "1.3.4" {
		t.Fatalf("b after its refused rollback: serving %q, previous %q; want 1.3.3 and 1.3.4 as before", v, prev)
	}
	// Read again, the rollback undoes the install.
	if err := b.a.Plugins.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := b.call("POST", "/v1/admin/plugins/account/rollback", b.op, nil); code != 200 || dataOf(body)["version"] != "1.3.3" {
		t.Fatalf("rollback through b once it follows: %d %v; want 1.3.3", code, body)
	}
}
