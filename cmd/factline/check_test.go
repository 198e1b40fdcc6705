package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/sdk/conformance"
)

// embeddedBinary is factline built with the embedplugins tag, as `make
// build` does, once for the tests that need it.
func embeddedBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// buildEmbedded builds the binary beside TestMain's plugins, the repo's
// plugins built by TestMain standing in for plugins/<name>/<name>.wasm
// through an overlay (the tree stays clean).
var buildEmbedded = sync.OnceValues(func() (string, error) {
	mods, err := filepath.Glob(filepath.Join(pluginsDir, "*.wasm"))
	if err != nil || len(mods) == 0 {
		return "", fmt.Errorf("no built plugins in %s: %v", pluginsDir, err)
	}
	replace := map[string]string{}
	for _, m := range mods {
		name := strings.TrimSuffix(filepath.Base(m), ".wasm")
		dst, err := filepath.Abs(filepath.Join("../../plugins", name, name+".wasm"))
		if err != nil {
			return "", err
		}
		replace[dst] = m
	}
	dir := filepath.Dir(pluginsDir)
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "factline-embedded")
	cmd := exec.Command("go", "build", "-tags", "embedplugins", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build with embedplugins: %v\n%s", err, out)
	}
	return bin, nil
})

// run runs bin to completion: stdout, stderr and the exit code.
func run(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return stdout.String(), stderr.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), 0
}

// commandGateway writes a gateway manifest of one command route.
func commandGateway(t *testing.T, dir, method, entity, command string) string {
	t.Helper()
	f := filepath.Join(dir, "gateway.yaml")
	src := "name: api\nversion: \"1\"\nroutes:\n  - path: /api/" + entity + "s/:id/x\n    method: " + method +
		"\n    entity: " + entity + "\n    action: command\n    command: " + command + "\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCheckCommandRoutesAgainstBuiltinPlugins: a binary with the plugins
// built in checks a command route against the account plugin's commands:
// a missing command is refused at the command's file:line:col with the
// list of the ledger's commands, a wrong method at the method's, and a
// good route passes without a warning. A second run finds the compiled
// plugin in the cache.
func TestCheckCommandRoutesAgainstBuiltinPlugins(t *testing.T) {
	t.Parallel()
	bin := embeddedBinary(t)
	cache := t.TempDir()
	for _, tc := range []struct {
		name, method, command string
		code                  int
		want                  string
	}{
		{"missing command", "POST", "earn", 1, ":8:14: route POST /api/accounts/:id/x: ledger account of entity type account has no command \"earn\" (its commands: budget, charge, cost, credit, deposit, payout)"},
		{"wrong method", "POST", "budget", 1, ":5:13: route POST /api/accounts/:id/x: command budget of ledger account takes GET, not POST"},
		{"good write", "POST", "deposit", 0, "ok: 1 file(s) valid"},
		{"good read", "GET", "budget", 0, "ok: 1 file(s) valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := commandGateway(t, t.TempDir(), tc.method, "account", tc.command)
			stdout, stderr, code := run(t, bin, "check", "--plugin-cache-dir", cache, gw)
			if code != tc.code || !strings.Contains(stdout, tc.want) {
				t.Fatalf("exit %d (want %d)\n%s%s\nwant %s", code, tc.code, stdout, stderr, tc.want)
			}
			if tc.code == 1 && !strings.HasPrefix(stdout, gw+tc.want) {
				t.Errorf("not at the route's file:line:col:\n%s", stdout)
			}
			if strings.Contains(stdout, "warning") {
				t.Errorf("a built-in ledger is known, no warning:\n%s", stdout)
			}
		})
	}
	// A layered type is held against the built-in ledger plugin it names,
	// with or without a command route, as serve holds it.
	gadgets := filepath.Join(t.TempDir(), "gadgets.yaml")
	if err := os.WriteFile(gadgets, []byte("name: gadgets\nversion: \"1\"\nentities:\n  gadget:\n    ledger: asset\n    fields: {}\n    facts: [earned]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, bin, "check", "--plugin-cache-dir", cache, gadgets)
	if want := gadgets + `:4:3: entities.gadget.ledger: ledger "asset" serves entity types asset, not "gadget"`; code != 1 || !strings.Contains(stdout, want) {
		t.Fatalf("a type its built-in ledger plugin does not declare: exit %d\n%s%s\nwant %s", code, stdout, stderr, want)
	}
}

// TestServeStopsOnACommandRouteItsLedgerLacks: serve refuses what check
// refuses. A route to a command the account plugin lacks made the
// start-up load refuse the plugin, and the account type was then served
// by the built-in ledger, without the plugin's rules (an overdraft was
// accepted). The process now stops with the route's file:line:col.
func TestServeStopsOnACommandRouteItsLedgerLacks(t *testing.T) {
	t.Parallel()
	gw := commandGateway(t, t.TempDir(), "POST", "account", "earn")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:0", "--domain", domainManifest(t), "--manifest", gw,
		"--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache, "--data-dir", t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("serve kept running with a route its ledger lacks: %v\n%s", err, stderr.String())
	}
	want := gw + ":8:14: route POST /api/accounts/:id/x: ledger account of entity type account has no command \"earn\""
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "factline serve: the manifests do not fit") ||
		!strings.Contains(stderr.String(), want) {
		t.Fatalf("exit %d, want 1 naming %s:\n%s", code, want, stderr.String())
	}
}

// TestCheckWarnsOfALedgerNothingIsNamed: a layered type whose ledger no
// built-in ledger or plugin is named passed check silently, while the
// admin API refuses the name and serve answers 503 for the type's facts
// and commands until a plugin of that name is loaded.
func TestCheckWarnsOfALedgerNothingIsNamed(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "widgets.yaml")
	if err := os.WriteFile(d, []byte("name: widgets\nversion: \"1\"\nentities:\n  widget:\n    ledger: nosuchledger\n    fields: {}\n    facts: [made]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, binary, "check", "--plugin-cache-dir", t.TempDir(), d)
	want := d + `:4:3: warning: entities.widget.ledger: no built-in ledger or plugin here is named "nosuchledger" (not built in, no --plugin gives it): ` +
		`install the plugin before this manifest; until one of that name is loaded, serve answers 503 for the type's facts and commands`
	if code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d (want 0)\n%s%s\nwant %s", code, stdout, stderr, want)
	}
}

// TestCheckListsCommandProblemsBesideOthers: a command route's problem is
// listed though another file has problems of its own.
func TestCheckListsCommandProblemsBesideOthers(t *testing.T) {
	t.Parallel()
	bin := embeddedBinary(t)
	dir := t.TempDir()
	gw := commandGateway(t, dir, "POST", "account", "earn")
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, bin, "check", "--plugin-cache-dir", t.TempDir(), gw, empty)
	if code != 1 || !strings.Contains(stdout, gw+":8:14: route POST /api/accounts/:id/x: ledger account of entity type account has no command \"earn\"") ||
		!strings.Contains(stdout, empty+":1:1: empty manifest") {
		t.Fatalf("exit %d, want both problems:\n%s%s", code, stdout, stderr)
	}
	// So is one beside other problems of its own file.
	src, err := os.ReadFile(gw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gw, append([]byte("colour: blue\n"), src...), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = run(t, bin, "check", "--plugin-cache-dir", t.TempDir(), gw)
	if code != 1 || !strings.Contains(stdout, gw+":9:14: route POST /api/accounts/:id/x: ledger account of entity type account has no command \"earn\"") ||
		!strings.Contains(stdout, gw+`:1:1: unknown key "colour" in manifest`) {
		t.Fatalf("exit %d, want both problems of one file:\n%s%s", code, stdout, stderr)
	}
}

// TestCheckCommandRoutesWithPluginFlag: --plugin FILE.wasm gives the
// commands of a ledger not built in; without it the route is a warning
// line (checked at serve time) and the exit status stays 0.
func TestCheckCommandRoutesWithPluginFlag(t *testing.T) {
	t.Parallel()
	points, err := conformance.Build(context.Background(), "../../sdk/conformance/testdata/points")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	module := filepath.Join(dir, "points.wasm")
	domain := filepath.Join(dir, "members.yaml")
	if err := os.WriteFile(module, points, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(domain, []byte("name: members\nversion: \"1\"\nentities:\n  member:\n    ledger: points\n    fields: {}\n    facts: [earned]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	for _, tc := range []struct {
		name, method, command string
		plugin                bool
		code                  int
		want                  string
	}{
		{"good route", "POST", "earn", true, 0, "ok: 1 file(s) valid"},
		{"missing command", "POST", "redeem", true, 1, ":8:14: route POST /api/members/:id/x: ledger points of entity type member has no command \"redeem\" (its commands: earn, points)"},
		{"wrong method", "POST", "points", true, 1, ":5:13: route POST /api/members/:id/x: command points of ledger points takes GET, not POST"},
		{"not given", "POST", "redeem", false, 0, ":4:5: warning: route POST /api/members/:id/x: ledger points of entity type member is not known here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := commandGateway(t, t.TempDir(), tc.method, "member", tc.command)
			args := []string{"check", "--plugin-cache-dir", cache, "--domain", domain}
			if tc.plugin {
				args = append(args, "--plugin", module)
			}
			stdout, stderr, code := cli(t, nil, append(args, gw)...)
			if code != tc.code || !strings.Contains(stdout, tc.want) {
				t.Fatalf("exit %d (want %d)\n%s%s\nwant %s", code, tc.code, stdout, stderr, tc.want)
			}
			if tc.code == 1 && !strings.Contains(stdout, gw+tc.want) {
				t.Errorf("not at the route's file:line:col:\n%s", stdout)
			}
		})
	}
	// A plugin given is held against the entity types the domain gives
	// it, with or without a command route, as serve holds it.
	gadgets := filepath.Join(dir, "gadgets.yaml")
	if err := os.WriteFile(gadgets, []byte("name: gadgets\nversion: \"1\"\nentities:\n  gadget:\n    ledger: points\n    fields: {}\n    facts: [earned]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, nil, "check", "--plugin-cache-dir", cache, "--plugin", module, gadgets)
	if want := gadgets + `:4:3: entities.gadget.ledger: ledger "points" serves entity types member, not "gadget"`; code != 1 || !strings.Contains(stdout, want) {
		t.Fatalf("a type its ledger plugin does not declare: exit %d\n%s%s\nwant %s", code, stdout, stderr, want)
	}
	if _, stderr, code := cli(t, nil, "check", "--plugin", filepath.Join(dir, "missing.wasm"), "--domain", domain, commandGateway(t, t.TempDir(), "POST", "member", "earn")); code != 1 || !strings.Contains(stderr, "--plugin") {
		t.Errorf("a missing --plugin file: exit %d, stderr %s", code, stderr)
	}
}

// TestCheckReportsEachMistakeOnceInLineOrder: check's whole report for a
// few manifests. A gateway manifest with a misspelt routes key is a
// gateway manifest with an unknown key, not a domain manifest missing
// its entities; the problems of the command routes against their ledgers
// are listed among each file's other problems by line and column, not
// after every file's; an escaped NUL or right-to-left override in a name
// is refused.
func TestCheckReportsEachMistakeOnceInLineOrder(t *testing.T) {
	t.Parallel()
	account := filepath.Join(pluginsDir, "account.wasm")
	for _, tc := range []struct {
		name  string
		files []string // contents of a.yaml, b.yaml, ...
		want  string   // stdout, FILE standing for the directory
	}{
		{"misspelt routes key", []string{"name: g\nversion: \"1\"\nRoutes:\n  - {path: /v1/status, method: GET, entity: system, action: get, auth: public}\n"},
			"FILE/a.yaml:3:1: unknown key \"Routes\" in manifest (did you mean \"routes\"?)\n"},
		{"command problems in line order", []string{
			"name: g\nversion: \"1\"\nroutes:\n  - {path: /api/accounts/:id/deposit, method: PUT, entity: account, action: command, command: deposit}\n  - {path: /api/status, method: GET, entity: system, action: got}\n",
			"name: h\nversion: \"1\"\nroutes:\n  - {path: /api/accounts/:id/charge, method: GET, entity: account, action: command, command: charge}\n  - {path: /api/other, method: GET, entity: system, action: got}\n",
		}, "FILE/a.yaml:4:47: route PUT /api/accounts/:id/deposit: command deposit of ledger account takes POST, not PUT\n" +
			"FILE/a.yaml:5:62: routes[1].action: \"got\" is not one of emit, get, create, list, query, command\n" +
			"FILE/b.yaml:4:46: route GET /api/accounts/:id/charge: command charge of ledger account takes POST, not GET\n" +
			"FILE/b.yaml:5:61: routes[1].action: \"got\" is not one of emit, get, create, list, query, command\n"},
		{"escaped controls in names", []string{
			"name: \"d\\u202E\"\nversion: \"1\"\nentities:\n  claim: {ledger: builtin, fields: {}, facts: [filed]}\n",
			"name: \"g\\0\"\nversion: \"1\"\nroutes:\n  - {path: /v1/status, method: GET, entity: system, action: get, auth: public}\n",
		}, "FILE/a.yaml:1:7: manifest.name: bidirectional control character U+202E is not allowed: it changes the order in which the text displays\n" +
			"FILE/b.yaml:1:7: manifest.name: control character U+0000 is not allowed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"check", "--plugin-cache-dir", pluginCache, "--plugin", account}
			for i, src := range tc.files {
				f := filepath.Join(dir, string(rune('a'+i))+".yaml")
				if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, f)
			}
			stdout, stderr, code := cli(t, nil, args...)
			if want := strings.ReplaceAll(tc.want, "FILE", dir); code != 1 || stdout != want {
				t.Fatalf("exit %d (want 1), stdout:\n%swant:\n%sstderr:\n%s", code, stdout, want, stderr)
			}
		})
	}
}

// TestCheckListsLedgerProblemsBesideTheParses: a domain manifest with
// problems of its own still has each type held against its ledger
// plugin, so one run lists every problem; the ledger's were listed only
// once the rest were fixed.
func TestCheckListsLedgerProblemsBesideTheParses(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "shop.yaml")
	src := "name: shop\nversion: \"1\"\nentities:\n" +
		"  gizmo:\n    ledger: account\n    fields:\n      color: {type: strin}\n    facts: [made]\n" +
		"  widget:\n    ledger: nosuchledger\n    fields: {}\n    facts: [made]\n" +
		"  bolt:\n    ledger: \"acc\\u202eount\"\n    fields: {}\n    facts: [made]\n"
	if err := os.WriteFile(d, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, embeddedBinary(t), "check", "--plugin-cache-dir", pluginCache, d)
	want := []string{
		d + `:7:21: entities.gizmo.fields.color.type: "strin" is not one of`,
		d + `:4:3: entities.gizmo.ledger: ledger "account" serves entity types account, not "gizmo"`,
		d + `:9:3: warning: entities.widget.ledger: no built-in ledger or plugin here is named "nosuchledger"`,
		d + `:14:13: entities.bolt.ledger: bidirectional control character U+202E is not allowed`,
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("no line %q", w)
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("exit %d (want 1)\n%s%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout, "bolt"); n != 1 {
		t.Errorf("the unsound ledger of bolt is said %d times, want once (its text problem only):\n%s", n, stdout)
	}
}
