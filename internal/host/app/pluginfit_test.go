package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/testutil"
)

// TestPluginVersionThatBreaksTheModelIsRefused: a new version of a ledger
// plugin that no longer serves an entity type the domain model gives it,
// or lacks a command a served route calls, is refused with every reason
// (422), and the version being served keeps serving; without the check
// every request on the type failed once it was swapped in.
func TestPluginVersionThatBreaksTheModelIsRefused(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, []byte("not a module")); code != 422 || body["detail"] != "Plugin points was refused; nothing was installed" {
		t.Fatalf("a refused first install: %d %v", code, body)
	}
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, fixture(t, "points")); code != 201 {
		t.Fatalf("install points 1.0.0: %d %v", code, body)
	}
	if code, body := l.putDomain("loyalty", loyaltyDomain); code != 201 {
		t.Fatalf("domain: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "member", "id": "m1"}); code != 201 {
		t.Fatalf("create member: %d %v", code, body)
	}
	v2 := moduleFrom(t, "testdata/points2")
	code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, v2)
	errs := fmt.Sprint(body["errors"])
	if code != 422 || body["detail"] != "Plugin points was refused; the current version keeps serving" ||
		!strings.Contains(errs, "the domain model gives entity type member to ledger points, and this version serves only reward") ||
		!strings.Contains(errs, `domain/loyalty:13:`) || !strings.Contains(errs, `has no command "earn"`) {
		t.Fatalf("a version that drops the served type and command: %d %v", code, body)
	}
	if code, body := l.call("POST", "/api/members/m1/earn", l.key, map[string]any{"points": 2}); code != 201 || dataOf(body)["type"] != "earned" {
		t.Fatalf("the served version after the refusal: %d %v", code, body)
	}
	code, body = l.call("GET", "/v1/admin/plugins", l.op, nil)
	if code != 200 || !strings.Contains(fmt.Sprint(body), "name:points") || !strings.Contains(fmt.Sprint(body), "version:1.0.0") {
		t.Fatalf("plugins after the refusal: %d %v", code, body)
	}
}

// TestGatewayManifestNamingAStoredTypeRestarts: a gateway manifest whose
// route names an entity type only a stored domain manifest declares, as
// running processes accept it after the type was added through the admin
// API, starts a process too: it was checked against the --domain files
// alone before the store was read, and every restart failed.
func TestGatewayManifestNamingAStoredTypeRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startLive(t, "sqlite", dir)
	if code, body := first.putDomain("deps", "name: deps\nversion: \"1\"\nentities:\n  dep1:\n    ledger: builtin\n    fields: {}\n    facts: [made]\n"); code != 201 {
		t.Fatalf("domain: %d %v", code, body)
	}
	first.stop()
	man := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(man, []byte("name: g\nversion: \"1\"\nroutes:\n  - {path: /deps/:id, method: GET, entity: dep1, action: get}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, "sqlite", dir, func(c *app.Config) { c.Manifest = man })
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "dep1", "id": "d1"}); code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	if code, body := l.call("GET", "/deps/d1", l.key, nil); code != 200 || dataOf(body)["id"] != "d1" {
		t.Fatalf("the manifest's route: %d %v", code, body)
	}
}

// TestSubscriptionPluginIsNoLedger: a domain manifest naming a
// subscription plugin as an entity type's ledger is refused; it was
// accepted, and facts on the type were then recorded with no ledger
// deciding anything.
func TestSubscriptionPluginIsNoLedger(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	code, body := l.putDomain("cogs", "name: cogs\nversion: \"1\"\nentities:\n  cog:\n    ledger: followup\n    fields: {}\n    facts: [turned]\n")
	if code != 422 || !strings.Contains(fmt.Sprint(body["errors"]), `entities.cog.ledger: plugin "followup" is a subscription plugin, not a ledger`) {
		t.Fatalf("a subscription plugin as a ledger: %d %v", code, body)
	}

	// A projection named like a config id: queries name a projection by
	// id or by name, the id first, so the name would reach another one.
	settings := map[string]any{"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour",
		"aggregations": []map[string]any{{"field": "count", "function": "count"}}, "materialize": false, "storageVersion": 1}
	code, body = l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "cfg_01M8D0JT5M4NP0WHR6Q9MZCH15", "settings": settings})
	if code != 400 || !strings.Contains(fmt.Sprint(body["errors"]), "has the form of a config id") {
		t.Fatalf("a projection named like a config id: %d %v", code, body)
	}
	// Nor may a name be another projection's id, or an id another's name:
	// the id would hide the name.
	if code, body := l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "id": "myproj", "name": "p1", "settings": settings}); code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	code, body = l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "myproj", "settings": settings})
	if code != 400 || !strings.Contains(fmt.Sprint(body["errors"]), `name "myproj" is the id of projection myproj`) {
		t.Fatalf("a projection named like another's id: %d %v", code, body)
	}
	code, body = l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "id": "p1", "name": "p2", "settings": settings})
	if code != 400 || !strings.Contains(fmt.Sprint(body["errors"]), `id "p1" is the name of projection myproj`) {
		t.Fatalf("a projection whose id is another's name: %d %v", code, body)
	}
}

// TestRollbackThatBreaksTheModelIsRefused: a rollback is checked as an
// install is. It was not: the version restored answered 503 for the
// commands the model routes to it, and every other process, which checks
// what it loads from the store, refused it and kept the newer version.
func TestRollbackThatBreaksTheModelIsRefused(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	v2 := moduleFrom(t, "testdata/points2")
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, v2); code != 201 {
		t.Fatalf("install the version serving reward: %d %v", code, body)
	}
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, fixture(t, "points")); code != 201 {
		t.Fatalf("install the version serving member: %d %v", code, body)
	}
	if code, body := l.putDomain("loyalty", loyaltyDomain); code != 201 {
		t.Fatalf("domain: %d %v", code, body)
	}
	code, body := l.call("POST", "/v1/admin/plugins/points/rollback", l.op, nil)
	if code != 422 || !strings.Contains(fmt.Sprint(body["errors"]), "the domain model gives entity type member to ledger points, and this version serves only reward") {
		t.Fatalf("a rollback to a version that does not serve the model: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "member", "id": "m1"}); code != 201 {
		t.Fatalf("create member: %d %v", code, body)
	}
	if code, body := l.call("POST", "/api/members/m1/earn", l.key, map[string]any{"points": 2}); code != 201 {
		t.Fatalf("the served version after the refused rollback: %d %v", code, body)
	}
}

// TestSubscriptionVersionDroppingAHandlerIsRefused: a subscription plugin
// version that no longer serves a handler the model's subscriptions name
// is refused; it was installed, and the subscription stalled on every
// process until a rollback.
func TestSubscriptionVersionDroppingAHandlerIsRefused(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	v2 := moduleFrom(t, "testdata/followup2")
	code, body := l.call("PUT", "/v1/admin/plugins/followup", l.op, v2)
	if code != 422 || !strings.Contains(fmt.Sprint(body["errors"]), "subscription no_answer_followup needs handler no_answer_followup, which this version does not serve") {
		t.Fatalf("a version dropping a handler in use: %d %v", code, body)
	}
	if _, ok := l.a.Plugins.SubscriptionHandler("no_answer_followup"); !ok {
		t.Fatal("the served version no longer serves its handler")
	}
}

// TestPluginOfAnotherKindCannotReplaceOneInUse: a subscription uploaded
// under the name of a ledger the domain model uses serves none of its
// entity types, and a ledger under a subscription's name none of its
// handlers: both are refused, and what was served keeps serving. The
// subscription had been installed, leaving account to the built-in
// generic ledger, which recorded a payout the account plugin refuses.
func TestPluginOfAnotherKindCannotReplaceOneInUse(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	code, body := l.call("PUT", "/v1/admin/plugins/account", l.op, moduleFrom(t, "testdata/accountsub"))
	errs := fmt.Sprint(body["errors"])
	if code != 422 || !strings.Contains(errs, "the domain model gives entity type account to ledger account, and this version is a subscription plugin, which serves no entity type") {
		t.Fatalf("a subscription over the account ledger: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "account", "id": "acc-1", "name": "Acme", "status": "active", "subtype": "customer"}); code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	// The account ledger still refuses a payout beyond the balance.
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "acc-1", "type": "payout", "data": map[string]any{"amount": 1000}}); code != 422 {
		t.Fatalf("a payout on an empty account after the refused upload: %d %v", code, body)
	}
	code, body = l.call("PUT", "/v1/admin/plugins/followup", l.op, moduleFrom(t, "testdata/followupledger"))
	if code != 422 || !strings.Contains(fmt.Sprint(body["errors"]), "subscription no_answer_followup needs handler no_answer_followup, which this version does not serve (it is a ledger plugin, which serves no handler)") {
		t.Fatalf("a ledger over the followup subscription: %d %v", code, body)
	}
	if _, ok := l.a.Plugins.SubscriptionHandler("no_answer_followup"); !ok {
		t.Fatal("the served subscription no longer serves its handler")
	}
}

// TestAPIDocumentFollowsTheModel: /openapi.json is made again only when
// what it describes changed (a plugin's commands can make it megabytes);
// a document already made is not served once a plugin or a domain
// manifest changed what it describes.
func TestAPIDocumentFollowsTheModel(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	doc := func() string {
		t.Helper()
		code, body := l.call("GET", "/openapi.json", "", nil)
		if code != 200 {
			t.Fatalf("/openapi.json: %d", code)
		}
		return fmt.Sprint(body["paths"])
	}
	if before := doc(); strings.Contains(before, "/v1/entities/{id}/earn") || doc() != before {
		t.Fatalf("before the plugin: %s", before)
	}
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, fixture(t, "points")); code != 201 {
		t.Fatalf("install points: %d %v", code, body)
	}
	if code, body := l.putDomain("loyalty", loyaltyDomain); code != 201 {
		t.Fatalf("domain: %d %v", code, body)
	}
	if after := doc(); !strings.Contains(after, "/v1/entities/{id}/earn") || !strings.Contains(after, "/api/members") {
		t.Fatalf("after the plugin and the domain manifest: %s", after)
	}
}

// TestStoredLayerThatStopsFittingAnswers503: a domain manifest stored
// through the admin API routes a command the account plugin lacks (put in
// the store around the checks, as a change made while another version
// served would be). At the next start the account plugin is refused. The
// process does not stop, since the admin API is how a stored manifest is
// fixed; the account type answers 503 saying why, never the built-in
// ledger without the plugin's rules (which took a charge on an empty
// account).
func TestStoredLayerThatStopsFittingAnswers503(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startLive(t, "sqlite", dir)
	if code, body := first.call("POST", "/v1/entities", first.key, map[string]any{"type": "account", "id": "acc-1", "name": "Acme", "status": "active", "subtype": "customer"}); code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	ctx := context.Background()
	stored, err := first.a.Store.ListDomainLayers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src := []byte("name: earn\nversion: \"1\"\nroutes:\n  - {path: /api/accounts/:id/earn, method: POST, entity: account, action: command, command: earn}\n")
	if err := first.a.Store.PutDomainLayer(ctx, &store.DomainLayer{Name: "earn", Source: src, SHA256: "x", UpdatedAt: time.Now().UnixMilli()}, store.LayersDigest(stored)); err != nil {
		t.Fatal(err)
	}
	first.stop()

	l := startLive(t, "sqlite", dir)
	for _, path := range []string{"/v1/facts", "/v1/entities/acc-1/charge"} {
		body := map[string]any{"amount": 500}
		if path == "/v1/facts" {
			body = map[string]any{"entity_id": "acc-1", "type": "charge", "data": map[string]any{"amount": 500}}
		}
		code, hdr, out := l.callHeader("POST", path, l.key, body)
		if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(fmt.Sprint(out["detail"]), "account ledger plugin was refused at start-up") {
			t.Fatalf("POST %s on a type whose plugin was refused: %d %v", path, code, out)
		}
	}
	// The stored manifest is removed through the admin API of the
	// process still serving, and the plugin refused at start-up is loaded
	// under the changed model: its rules apply again (no overdraft).
	if code, body := l.call("DELETE", "/v1/admin/domain/earn", l.op, nil); code != 200 {
		t.Fatalf("remove the stored manifest: %d %v", code, body)
	}
	testutil.EventuallyNil(t, time.Minute, func() error {
		code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "acc-1", "type": "charge", "data": map[string]any{"amount": 500}})
		if code != 422 {
			return fmt.Errorf("a charge on an empty account once the plugin may load: %d %v, want the plugin's 422", code, body)
		}
		return nil
	})
}
