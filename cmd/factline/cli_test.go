package main_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withDir replaces each "DIR" of args with dir.
func withDir(args []string, dir string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "DIR", dir)
	}
	return out
}

// assertNotCreated fails unless dir does not exist: a refused command
// created nothing.
func assertNotCreated(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s was created (stat: %v)", dir, err)
	}
}

// TestCommandsRefuseArguments: a command that takes flags only refuses a
// positional argument, naming it, with exit 2 and before it does
// anything; flags after an argument are still read. FACTLINE_ADDR makes
// a serve that read only the flags before the argument stop at once.
func TestCommandsRefuseArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "extra-arg", "--data-dir", "DIR", "--addr", "127.0.0.1:0"}, "factline serve: unexpected arguments [extra-arg]"},
		{[]string{"version", "extra"}, "factline version: unexpected arguments [extra]"},
		{[]string{"--version", "extra"}, "factline version: unexpected arguments [extra]"},
		{[]string{"probe", "http://127.0.0.1:1/ready"}, "factline probe: unexpected arguments [http://127.0.0.1:1/ready]"},
		{[]string{"openapi", "gateway.yaml"}, "factline openapi: unexpected arguments [gateway.yaml]"},
		{[]string{"migrate", "up", "--data-dir", "DIR", "extra"}, "factline migrate up: unexpected arguments [extra]"},
		{[]string{"migrate", "status", "extra", "--data-dir", "DIR"}, "factline migrate status: unexpected arguments [extra]"},
		{[]string{"keys", "create", "--tenant", "t", "extra", "--data-dir", "DIR"}, "factline keys create: unexpected arguments [extra]"},
		{[]string{"keys", "list", "--data-dir", "DIR", "extra"}, "factline keys list: unexpected arguments [extra]"},
		{[]string{"keys", "revoke", "key_a", "key_b", "--data-dir", "DIR"}, "factline keys revoke: unexpected arguments [key_a key_b]"},
		{[]string{"keys", "revoke", "--id", "key_a", "key_b", "--data-dir", "DIR"}, "factline keys revoke: unexpected arguments [key_b]"},
		{[]string{"webhooks", "dead-letters", "--tenant", "t", "--data-dir", "DIR", "extra"}, "factline webhooks dead-letters: unexpected arguments [extra]"},
		{[]string{"ledger", "rebuild", "--tenant", "t", "--entity-type", "account", "--data-dir", "DIR", "extra"}, "factline ledger rebuild: unexpected arguments [extra]"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			out, errOut, code := cliWithin(t, time.Minute, []string{"FACTLINE_ADDR=garbage"}, withDir(tc.args, dir)...)
			if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
				t.Fatalf("exit %d (want 2)\n%s%s\nwant stderr to contain %q", code, out, errOut, tc.want)
			}
			assertNotCreated(t, dir)
		})
	}
}

// TestMalformedDatabaseURLIsAUsageError: a --database-url that is no
// Postgres URL or connection string is exit 2 on every command that opens
// the store, before it opens anything, and the value (it may hold a
// password) is not repeated.
func TestMalformedDatabaseURLIsAUsageError(t *testing.T) {
	t.Parallel()
	const url = "mysql://app:s3cret@db.example:3306/app"
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0"},
		{"migrate", "up"},
		{"migrate", "status"},
		{"keys", "list"},
		{"webhooks", "dead-letters", "--tenant", "t"},
		{"ledger", "rebuild", "--tenant", "t", "--entity-type", "account"},
	} {
		name := strings.Join(args[:2], " ")
		if args[0] == "serve" {
			name = "serve"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			out, errOut, code := cliWithin(t, time.Minute, nil, append(args, "--database-url", url, "--data-dir", dir)...)
			want := "factline " + name + ": --database-url: want a Postgres URL"
			if code != 2 || !strings.HasPrefix(errOut, want) || strings.Contains(errOut, "s3cret") || out != "" {
				t.Fatalf("exit %d (want 2)\n%s%s\nwant stderr to start with %q, without the password", code, out, errOut, want)
			}
			assertNotCreated(t, dir)
		})
	}
}

// TestServeRefusesBadFlagValues: a serve flag value serve cannot run
// with, or would silently replace with a default, is one line on stderr
// and exit 2 before the data dir is created (no migration, no plugin
// loading, no log line).
func TestServeRefusesBadFlagValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--docs-url", "not a url", `--docs-url "not a url": want an absolute http or https URL`},
		{"--docs-url", "ftp://docs.example.com", `--docs-url "ftp://docs.example.com": want an absolute http or https URL`},
		{"--docs-url", "https://docs.example.com?v=1", `--docs-url "https://docs.example.com?v=1"`},
		{"--body-limit", "-5", "--body-limit must be at least 1 (bytes), got -5"},
		{"--body-limit", "0", "--body-limit must be at least 1 (bytes), got 0"},
		{"--plugin-memory-mib", "0", "--plugin-memory-mib must be 8 to 4096, got 0"},
		{"--plugin-memory-mib", "4", "--plugin-memory-mib must be 8 to 4096, got 4"},
		{"--plugin-memory-mib", "5000", "--plugin-memory-mib must be 8 to 4096, got 5000"},
		{"--plugin-timeout", "0s", "--plugin-timeout must be positive (for example 100ms), got 0s"},
		{"--plugin-timeout", "-1s", "--plugin-timeout must be positive (for example 100ms), got -1s"},
		{"--secret-key", "short", "--secret-key: want 32 bytes, base64 or hex encoded"},
		{"--webhook-allow-networks", "notacidr", `--webhook-allow-networks: webhook allow-list: "notacidr" is neither an address nor a CIDR prefix`},
		{"--redis-url", "http://127.0.0.1:6379", "--redis-url: redis url: "},
		{"--operator-tenant", "not a tenant", `--operator-tenant "not a tenant": use 1-64 letters`},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			out, errOut, code := cliWithin(t, time.Minute, nil, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir,
				"--plugin-cache-dir", pluginCache, tc.flag, tc.value)
			if code != 2 || !strings.HasPrefix(errOut, "factline serve: ") || strings.Count(errOut, "\n") != 1 ||
				!strings.Contains(errOut, tc.want) || out != "" {
				t.Fatalf("exit %d (want 2)\n%s%s\nwant one line on stderr containing %q", code, out, errOut, tc.want)
			}
			if tc.flag == "--secret-key" && strings.Contains(errOut, tc.value) {
				t.Errorf("the message repeats the secret key: %s", errOut)
			}
			assertNotCreated(t, dir)
		})
	}
}

// TestServeRefusesABadGatewayManifestBeforeTheStore: a gateway manifest
// with a problem it has whatever the domain manifests (a syntax error, a
// key of the wrong kind, a control character in its name) stops serve
// with exit 1 and the problem at its file:line:col, before the store is
// opened: no data dir, and no store in an existing one, is created.
func TestServeRefusesABadGatewayManifestBeforeTheStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src, want string
	}{
		{"syntax error", "name: g\nversion: \"1\"\nroutes:\n  - {path: /x, method: GET\n", ":4:5: YAML syntax error: did not find expected ',' or '}'"},
		{"routes not a list", "name: g\nversion: \"1\"\nroutes: {path: /x}\n", ":3:9: routes must be a list, got a mapping"},
		{"NUL in the name", "name: \"g\\0\"\nversion: \"1\"\nroutes:\n  - {path: /v1/status, method: GET, entity: system, action: get, auth: public}\n",
			":1:7: manifest.name: control character U+0000 is not allowed"},
	} {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, data dir exists %v", tc.name, existing), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				man := filepath.Join(dir, "gateway.yaml")
				if err := os.WriteFile(man, []byte(tc.src), 0o644); err != nil {
					t.Fatal(err)
				}
				data := filepath.Join(dir, "data")
				if existing {
					if err := os.Mkdir(data, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				out, errOut, code := cliWithin(t, time.Minute, nil, "serve", "--addr", "127.0.0.1:19011", "--data-dir", data,
					"--plugin-cache-dir", pluginCache, "--manifest", man)
				if want := "factline serve: manifests:\n" + man + tc.want + "\n"; code != 1 || !strings.HasSuffix(errOut, want) {
					t.Fatalf("exit %d (want 1)\n%s%s\nwant stderr ending in %q", code, out, errOut, want)
				}
				if strings.Contains(errOut, "migration") {
					t.Errorf("the store was migrated:\n%s", errOut)
				}
				if !existing {
					assertNotCreated(t, data)
				} else if entries, err := os.ReadDir(data); err != nil || len(entries) > 0 {
					t.Errorf("the data dir holds %v (%v), want nothing", entries, err)
				}
			})
		}
	}
}

// TestHelpAndUsageExitCodes: -h, --help and help print the help of every
// command and group of commands to stdout with exit 0; a usage mistake
// is exit 2 with nothing on stdout.
func TestHelpAndUsageExitCodes(t *testing.T) {
	t.Parallel()
	type tc struct {
		args []string
		code int
		want string // in stdout when code is 0, stderr otherwise
	}
	var cases []tc
	for _, h := range []string{"-h", "--help", "help"} {
		cases = append(cases, tc{[]string{h}, 0, "Usage: factline <command>"})
		for _, g := range []string{"keys", "plugin", "migrate", "ledger", "webhooks"} {
			cases = append(cases, tc{[]string{g, h}, 0, "Usage: factline " + g + " <command>"})
		}
	}
	for _, leaf := range [][]string{
		{"serve"}, {"check"}, {"openapi"}, {"probe"}, {"version"},
		{"keys", "create"}, {"keys", "list"}, {"keys", "revoke"}, {"migrate", "up"}, {"migrate", "status"},
		{"plugin", "test"}, {"ledger", "rebuild"},
		{"webhooks", "replay"}, {"webhooks", "dead-letters"}, {"webhooks", "pause"}, {"webhooks", "resume"},
	} {
		want := "Usage: factline " + strings.Join(leaf, " ")
		cases = append(cases, tc{append(leaf[:len(leaf):len(leaf)], "-h"), 0, want}, tc{append(leaf[:len(leaf):len(leaf)], "--help"), 0, want},
			tc{append([]string{"help"}, leaf...), 0, want})
	}
	cases = append(cases,
		tc{[]string{"-h"}, 0, "webhooks replay|dead-letters|pause|resume"},
		tc{[]string{"--version"}, 0, "factline "},
		tc{[]string{"-version"}, 0, "factline "},
		tc{nil, 2, "Usage: factline <command>"},
		tc{[]string{"keys"}, 2, "factline keys: a command is required"},
		tc{[]string{"keys", "frob"}, 2, `factline keys: unknown command "frob"`},
		tc{[]string{"plugin"}, 2, "factline plugin: a command is required"},
		tc{[]string{"plugin", "frob"}, 2, `factline plugin: unknown command "frob"`},
		tc{[]string{"migrate", "frob"}, 2, `factline migrate: unknown command "frob"`},
		tc{[]string{"ledger", "frob"}, 2, `factline ledger: unknown command "frob"`},
		tc{[]string{"webhooks", "frob"}, 2, `factline webhooks: unknown command "frob"`},
		tc{[]string{"webhooks", "replay", "--data-dir", "DIR"}, 2, "factline webhooks replay: --tenant is required"},
		tc{[]string{"webhooks", "replay", "--tenant", "t", "--data-dir", "DIR"}, 2, "give delivery ids or --all"},
		tc{[]string{"webhooks", "pause", "--tenant", "t", "--data-dir", "DIR"}, 2, "give one config id"},
		tc{[]string{"webhooks", "dead-letters", "--tenant", "t", "--limit", "0", "--data-dir", "DIR"}, 2, "--limit must be 1 to"},
		tc{[]string{"plugin", "test"}, 2, "want one FILE.wasm"},
		tc{[]string{"plugin", "test", "--memory-mib", "0", "x.wasm"}, 2, "--memory-mib must be 8 to 4096, got 0"},
		tc{[]string{"keys", "create", "--no-such-flag"}, 2, "factline keys create: flag provided but not defined: -no-such-flag"},
	)
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			out, errOut, code := cliWithin(t, time.Minute, nil, withDir(c.args, dir)...)
			got, other := out, errOut
			if c.code != 0 {
				got, other = errOut, out
			}
			if code != c.code || !strings.Contains(got, c.want) || other != "" {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant %q in the stream of exit %d and nothing in the other",
					code, c.code, out, errOut, c.want, c.code)
			}
			assertNotCreated(t, dir)
		})
	}
}

// TestCommandsNeedAnExistingStore: the commands that only read or change
// a store refuse an embedded data dir that holds none (a mistyped
// --data-dir, existing or not) with exit 1, naming it and how to create
// the store, and create nothing; migrate up creates it, after which they
// work.
func TestCommandsNeedAnExistingStore(t *testing.T) {
	t.Parallel()
	commands := [][]string{
		{"keys", "create", "--tenant", "acme"},
		{"keys", "list"},
		{"keys", "revoke", "--id", "key_nope"},
		{"webhooks", "dead-letters", "--tenant", "acme"},
		{"webhooks", "replay", "--tenant", "acme", "--all"},
		{"webhooks", "pause", "--tenant", "acme", "cfg_nope"},
		{"webhooks", "resume", "--tenant", "acme", "cfg_nope"},
		{"migrate", "status"},
		{"ledger", "rebuild", "--tenant", "acme", "--entity-type", "account"},
	}
	for _, args := range commands {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			t.Parallel()
			for _, existing := range []bool{false, true} {
				dir := filepath.Join(t.TempDir(), "data")
				if existing {
					if err := os.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				out, errOut, code := cliWithin(t, time.Minute, nil, append(args, "--data-dir", dir)...)
				want := "factline " + strings.Join(args[:2], " ") + ": no store in " + dir + " (no factline.db there)"
				if code != 1 || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "factline migrate up --data-dir "+dir) || out != "" {
					t.Fatalf("data dir exists: %v: exit %d (want 1)\n%s%s\nwant stderr to start with %q", existing, code, out, errOut, want)
				}
				if _, err := os.Stat(filepath.Join(dir, "factline.db")); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("data dir exists: %v: factline.db was created (stat: %v)", existing, err)
				}
				if !existing {
					assertNotCreated(t, dir)
				}
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "data")
	if out, errOut, code := cli(t, nil, "migrate", "up", "--data-dir", dir); code != 0 {
		t.Fatalf("migrate up in a new data dir: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, nil, "keys", "create", "--tenant", "acme", "--data-dir", dir); code != 0 || !strings.HasPrefix(out, "fl_live_") {
		t.Fatalf("keys create after migrate up: exit %d\n%s%s", code, out, errOut)
	}
}

// TestLedgerRebuildKnowsTheGatewayManifestsTypes: entity types a gateway
// manifest declares (ticket in manifests/gateway.yaml) are platform types
// when served, so ledger rebuild takes the manifest to know them too.
func TestLedgerRebuildKnowsTheGatewayManifestsTypes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if out, errOut, code := cli(t, nil, "migrate", "up", "--data-dir", dir); code != 0 {
		t.Fatalf("migrate up: exit %d\n%s%s", code, out, errOut)
	}
	args := []string{"ledger", "rebuild", "--tenant", "acme", "--entity-type", "ticket", "--data-dir", dir}
	if _, errOut, code := cli(t, nil, args...); code != 1 || !strings.Contains(errOut, "Unknown entity type: ticket") {
		t.Fatalf("without the manifest: exit %d, stderr %s; want 1 and the unknown type", code, errOut)
	}
	gw, err := filepath.Abs("../../manifests/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, nil, append(args, "--manifest", gw)...)
	if code != 0 || out != "rebuilt 0 ticket entities of tenant acme from 0 facts; 0 snapshots changed\n" {
		t.Fatalf("with the manifest: exit %d\n%s%s", code, out, errOut)
	}
	// A rebuild serves nothing: it neither reads nor makes the webhook
	// secret key (on Postgres, a key file made in ./data, or refused
	// as not the database's key, stopped it).
	if _, err := os.Stat(filepath.Join(dir, "webhook-secret.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ledger rebuild made a webhook key file (stat: %v)", err)
	}
}

// TestServeOnATakenAddressSaysOnlyThat: a serve that cannot listen stops
// the plugin loading it began; that stop is not logged as a failed load
// or as plugins missing, so the one line that counts is the last and only
// complaint.
func TestServeOnATakenAddressSaysOnlyThat(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stderr, code := cli(t, nil, "serve", "--addr", ln.Addr().String(), "--data-dir", t.TempDir(),
		"--domain", domainManifest(t), "--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache)
	if code != 1 || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, noise := range []string{`"level":"ERROR"`, "are not loaded"} {
		if strings.Contains(stderr, noise) {
			t.Errorf("stderr has %s before the real error:\n%s", noise, stderr)
		}
	}
}

// TestServeLogsOnlyJSON: with Redis unreachable, go-redis's own messages
// (failed dials) go through the JSON log like every other line, not
// between them as plain text.
func TestServeLogsOnlyJSON(t *testing.T) {
	s := startProcess(t, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--redis-url", "redis://127.0.0.1:1/0"})
	s.stop(t)
	var dials int
	for _, line := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
			t.Errorf("a log line that is not JSON: %s", line)
		}
		if strings.Contains(line, "failed to dial") {
			dials++
		}
	}
	if dials == 0 {
		t.Errorf("no failed dial logged:\n%s", s.stderr)
	}
}

// TestServeSaysWhereTheDomainMisfitsItsLedger: a domain manifest file that
// gives an entity type to a ledger plugin serving other types stops serve
// with exit 1 and the problem at the type's file:line:col, as check gives
// it; serve named only the plugin.
func TestServeSaysWhereTheDomainMisfitsItsLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dom := filepath.Join(dir, "shop.yaml")
	src := "name: shop\nversion: \"1.0.0\"\nentities:\n  widget:\n    ledger: account\n    fields:\n      name: {type: string}\n    facts:\n      made: {}\n"
	if err := os.WriteFile(dom, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cliWithin(t, time.Minute, nil, "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache, "--domain", dom)
	want := dom + ":4:3: the domain model gives entity type widget to ledger account, and this version serves only account"
	if code != 1 || !strings.Contains(errOut, "\n"+want) {
		t.Fatalf("exit %d (want 1)\n%s%s\nwant a line starting %q", code, out, errOut, want)
	}
}
