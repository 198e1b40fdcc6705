package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/sdk/conformance"
)

var (
	binary      string
	pluginsDir  string // the repo's plugins, built
	pluginCache string // compiled plugins, shared by every server the tests start
)

func TestMain(m *testing.M) {
	// Removed by testutil.Main, which exits the process: a defer here
	// would never run.
	dir, err := testutil.TempDir("factline-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "factline")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build factline: %v\n%s", err, out)
		os.Exit(1)
	}
	pluginsDir = filepath.Join(dir, "plugins")
	pluginCache = filepath.Join(dir, "wasm-cache")
	if err := buildPlugins(pluginsDir); err != nil {
		fmt.Fprintf(os.Stderr, "build plugins: %v\n", err)
		os.Exit(1)
	}
	testutil.Main(m)
}

// buildPlugins builds every plugin of the repo into dir/<name>.wasm.
func buildPlugins(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mains, _ := filepath.Glob("../../plugins/*/main.go")
	for _, m := range mains {
		src := filepath.Dir(m)
		module, err := conformance.Build(context.Background(), src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)+".wasm"), module, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// domainManifest is the repo's manifest, resolved from this package.
func domainManifest(t *testing.T) string {
	p, err := filepath.Abs("../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cli runs the binary to completion and returns stdout, stderr and the
// exit code.
func cli(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return cliWithin(t, 0, env, args...)
}

// cliWithin is cli failing the test when the command runs longer than
// timeout (0: no limit), for a command that would otherwise start serving.
func cliWithin(t *testing.T, timeout time.Duration, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("factline %s still ran after %v\n%s%s", strings.Join(args, " "), timeout, stdout.String(), stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// newStore returns a data dir holding an embedded store, created with
// `factline migrate up`: the commands that only read or change a store
// (keys, webhooks) refuse a data dir without one.
func newStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, errOut, code := cli(t, nil, "migrate", "up", "--data-dir", dir); code != 0 {
		t.Fatalf("migrate up: exit %d\n%s%s", code, out, errOut)
	}
	return dir
}

// server is a running `factline serve` process.
type server struct {
	cmd    *exec.Cmd
	base   string
	stderr *testutil.Logs
	exited chan error
}

var listenRe = regexp.MustCompile(`listening on (http://\S+)`)

func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	return startProcess(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--domain", domainManifest(t), "--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache}, args...))
}

// startProcess runs the binary with args (a serve command listening on
// 127.0.0.1:0) and waits until it listens.
func startProcess(t *testing.T, args []string) *server {
	t.Helper()
	return startProcessEnv(t, nil, args)
}

// startProcessEnv is startProcess with env added to the environment.
func startProcessEnv(t *testing.T, env []string, args []string) *server {
	t.Helper()
	cmd := exec.Command(binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, stderr: &testutil.Logs{}, exited: make(chan error, 1)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				lines <- m[1]
			}
		}
	}()
	select {
	case s.base = <-lines:
	case err := <-s.exited:
		t.Fatalf("serve exited: %v\n%s", err, s.stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not listen within 20 s\n%s", s.stderr)
	}
	return s
}

// waitReady waits until /health reports every check ok (plugins loaded).
func (s *server) waitReady(t *testing.T) {
	t.Helper()
	testutil.EventuallyNil(t, 3*time.Minute, func() error {
		code, body := s.do(t, "GET", "/health", "", "")
		if code == 200 && data(body)["status"] == "ok" {
			return nil
		}
		return fmt.Errorf("not ready: %d %v\n%s", code, body, s.stderr)
	})
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM\n%s", err, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30 s of SIGTERM")
	}
}

func (s *server) do(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, out
}

func data(m map[string]any) map[string]any { d, _ := m["data"].(map[string]any); return d }

// TestEmbeddedStartsFast: the embedded default serves /health within
// seconds on a fresh data dir.
func TestEmbeddedStartsFast(t *testing.T) {
	start := time.Now()
	s := startServer(t, "--data-dir", t.TempDir())
	code, body := s.do(t, "GET", "/health", "", "")
	// Plugins may still be compiling: the gateway answers meanwhile.
	if st := data(body)["status"]; code != 200 || (st != "ok" && st != "degraded") {
		t.Fatalf("health %d %v", code, body)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("health answered after %v", took)
	}
	s.waitReady(t)
	s.stop(t)
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var storeArgs []string
			if backend == "postgres" {
				// Local state (the webhook key file) goes to a temp dir too.
				storeArgs = []string{"--database-url", testutil.Postgres(t), "--data-dir", t.TempDir()}
			} else {
				storeArgs = []string{"--data-dir", newStore(t)}
			}
			key, stderr, code := cli(t, nil, append([]string{"keys", "create", "--tenant", "acme", "--mode", "live"}, storeArgs...)...)
			key = strings.TrimSpace(key)
			if code != 0 || !strings.HasPrefix(key, "fl_live_") {
				t.Fatalf("keys create: %d %q %s", code, key, stderr)
			}
			s := startServer(t, storeArgs...)
			s.waitReady(t)
			code, body := s.do(t, "POST", "/v1/entities", key, `{"type":"account","id":"acct-1","name":"Acme","status":"active","subtype":"customer"}`)
			if code != 201 {
				t.Fatalf("create %d %v", code, body)
			}
			code, body = s.do(t, "POST", "/v1/facts", key, `{"entity_id":"acct-1","type":"deposit","data":{"amount":0.1}}`)
			if code != 201 {
				t.Fatalf("fact %d %v", code, body)
			}
			factID := data(body)["id"].(string)
			code, body = s.do(t, "POST", "/v1/configs", key, `{"type":"pricing","settings":{"rate":1}}`)
			if code != 201 {
				t.Fatalf("config %d %v", code, body)
			}
			cfgID := data(body)["id"].(string)
			s.stop(t)

			s = startServer(t, storeArgs...)
			defer s.stop(t)
			s.waitReady(t)
			if code, body = s.do(t, "GET", "/v1/entities/acct-1?entity_type=account", key, ""); code != 200 || data(body)["version"] != float64(2) {
				t.Fatalf("entity after restart: %d %v", code, body)
			}
			if code, body = s.do(t, "GET", "/v1/facts/"+factID, key, ""); code != 200 || data(body)["seq"] != float64(1) {
				t.Fatalf("fact after restart: %d %v", code, body)
			}
			if code, _ = s.do(t, "GET", "/v1/configs/"+cfgID, key, ""); code != 200 {
				t.Fatalf("config after restart: %d", code)
			}
			// The ledger continues where it was.
			if code, body = s.do(t, "POST", "/v1/facts", key, `{"entity_id":"acct-1","type":"charge","data":{"amount":0.05}}`); code != 201 || data(body)["seq"] != float64(2) {
				t.Fatalf("append after restart: %d %v", code, body)
			}
		})
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	dir := newStore(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Usage"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"keys without tenant", []string{"keys", "create", "--data-dir", dir}, 2, "--tenant is required"},
		{"keys bad mode", []string{"keys", "create", "--tenant", "t", "--mode", "root", "--data-dir", dir}, 2, `--mode "root"`},
		{"keys bad tenant", []string{"keys", "create", "--tenant", "a b", "--data-dir", dir}, 2, "--tenant"},
		{"revoke unknown", []string{"keys", "revoke", "--id", "key_nope", "--data-dir", dir}, 1, "no API key with id key_nope"},
		{"bad flag", []string{"serve", "--no-such-flag"}, 2, "flag provided but not defined"},
		{"bad listen address", []string{"serve", "--addr", "garbage", "--data-dir", dir}, 2, `--addr "garbage": want host:port or :port`},
		{"bad metrics address", []string{"serve", "--metrics-addr", "garbage", "--data-dir", dir}, 2, `--metrics-addr "garbage": want host:port or :port`},
		{"negative plugin instances", []string{"serve", "--plugin-instances", "-1", "--data-dir", dir}, 2, "--plugin-instances must be 0 (2 per GOMAXPROCS) or 1 to 1024, got -1"},
		{"too many plugin instances", []string{"serve", "--plugin-instances", "1025", "--data-dir", dir}, 2, "--plugin-instances must be 0 (2 per GOMAXPROCS) or 1 to 1024, got 1025"},
		{"check nothing", []string{"check"}, 2, "usage: factline check"},
		{"check missing file", []string{"check", filepath.Join(dir, "nope.yaml")}, 1, filepath.Join(dir, "nope.yaml") + ": open "},
		{"bad database url", []string{"keys", "list", "--database-url", "postgres://127.0.0.1:1/x?connect_timeout=2"}, 1, "postgres"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
				t.Fatalf("exit %d (want %d), output:\n%s%s\nwant it to contain %q", code, tc.code, stdout, stderr, tc.want)
			}
		})
	}
}

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	stdout, _, code := cli(t, nil, "check", domainManifest(t))
	if code != 0 || !strings.Contains(stdout, "ok") {
		t.Fatalf("valid manifest: %d %s", code, stdout)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nversion: \"1\"\nentities:\n  account:\n    ledgr: generic\n    fields: {}\n    facts: []\n"), 0o644)
	stdout, _, code = cli(t, nil, "check", bad)
	if code != 1 || !strings.Contains(stdout, bad+":5:5: unknown key \"ledgr\"") {
		t.Fatalf("invalid manifest: %d %s", code, stdout)
	}
	stdout, _, code = cli(t, nil, "check", "--format", "json", bad)
	var out struct {
		Valid    bool
		Problems []struct {
			Line, Column int
			Message      string
		}
	}
	if code != 1 || json.Unmarshal([]byte(stdout), &out) != nil || out.Valid || len(out.Problems) == 0 || out.Problems[0].Line != 5 {
		t.Fatalf("json output: %d %s", code, stdout)
	}
}

// TestCheckLocatesEveryProblem: files the YAML parser cannot read, empty
// files and second documents are problems at a line and column, exit 1.
func TestCheckLocatesEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, src, want string
	}{
		{"empty", "", ":1:1: empty manifest"},
		{"nul", "name: x\nversion: \x00\n", ":2:10: NUL byte: a manifest is UTF-8 text"},
		{"alias", "name: x\nversion: *v\n", ":2:10: YAML syntax error: unknown anchor 'v' referenced"},
		{"two documents", "name: x\nversion: \"1\"\nroutes: [{path: /v1/status, method: GET, entity: system, action: get}]\n---\nrubbish\n", ":4:1: a manifest file holds one YAML document; a second starts here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(file, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := cli(t, nil, "check", file)
			if code != 1 || stdout != file+tc.want+"\n" {
				t.Fatalf("exit %d, output:\n%s%s\nwant %s%s", code, stdout, stderr, file, tc.want)
			}
		})
	}
}

func TestEnvironmentConfiguresFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, stderr, code := cli(t, []string{"FACTLINE_DATA_DIR=" + dir}, "migrate", "up"); code != 0 {
		t.Fatalf("migrate up: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "factline.db")); err != nil {
		t.Fatalf("FACTLINE_DATA_DIR ignored: %v", err)
	}
	_, stderr, code := cli(t, []string{"FACTLINE_DATA_DIR=" + dir}, "keys", "create", "--tenant", "envt")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	stdout, _, _ := cli(t, []string{"FACTLINE_DATA_DIR=" + dir}, "keys", "list")
	if !strings.Contains(stdout, "envt") {
		t.Fatalf("keys list: %s", stdout)
	}
}

// TestBadEnvironmentValues: a FACTLINE_<FLAG> value of the wrong kind is
// a usage error naming the variable, its value and what the flag wants.
func TestBadEnvironmentValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ env, want string }{
		{"FACTLINE_MIGRATE=maybe", `FACTLINE_MIGRATE="maybe": --migrate wants true or false`},
		{"FACTLINE_BODY_LIMIT=abc", `FACTLINE_BODY_LIMIT="abc": --body-limit wants an integer`},
		{"FACTLINE_PLUGIN_TIMEOUT=5", `FACTLINE_PLUGIN_TIMEOUT="5": --plugin-timeout wants a duration`},
	} {
		_, stderr, code := cli(t, []string{tc.env}, "serve", "--data-dir", dir)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, %q; want 2 and %q", tc.env, code, stderr, tc.want)
		}
	}
}

// TestHotReload: with --watch, an edited manifest's routes are served
// without a restart; an invalid edit is refused and the old routes stay.
func TestHotReload(t *testing.T) {
	dir := t.TempDir()
	man := filepath.Join(dir, "gateway.yaml")
	write := func(body string) {
		t.Helper()
		// Write then rename, so the watcher never reads a half-written file.
		tmp := man + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, man); err != nil {
			t.Fatal(err)
		}
	}
	write("name: one\nversion: \"1\"\nroutes:\n  - {path: /v1/one, method: GET, entity: system, action: get, auth: public}\n")
	s := startServer(t, "--data-dir", filepath.Join(dir, "data"), "--manifest", man, "--watch")
	defer s.stop(t)
	if code, _ := s.do(t, "GET", "/v1/one", "", ""); code != 200 {
		t.Fatalf("initial route: %d", code)
	}
	waitFor := func(path string, want int) {
		t.Helper()
		testutil.EventuallyNil(t, 30*time.Second, func() error {
			if code, _ := s.do(t, "GET", path, "", ""); code != want {
				return fmt.Errorf("GET %s still %d, want %d\n%s", path, code, want, s.stderr)
			}
			return nil
		})
	}
	write("name: two\nversion: \"2\"\nroutes:\n  - {path: /v1/two, method: GET, entity: system, action: get, auth: public}\n")
	waitFor("/v1/two", 200)
	waitFor("/v1/one", 404)

	write("name: broken\nversion: \"3\"\nroutes:\n  - {path: /v1/three, method: FETCH, entity: system, action: get}\n")
	testutil.Eventually(t, 30*time.Second, "the invalid manifest to be reported", func() bool {
		return strings.Contains(s.stderr.String(), "manifests refused")
	})
	if !strings.Contains(s.stderr.String(), "gateway.yaml:4:") {
		t.Fatalf("refusal does not name the line:\n%s", s.stderr)
	}
	if code, _ := s.do(t, "GET", "/v1/two", "", ""); code != 200 {
		t.Fatalf("old routes stopped serving after an invalid reload: %d", code)
	}

	// A deleted manifest is said once, and the routes keep serving; put
	// back, it is served again.
	if err := os.Remove(man); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the deleted manifest to be reported", func() bool {
		return strings.Contains(s.stderr.String(), "manifests cannot be read")
	})
	if code, _ := s.do(t, "GET", "/v1/two", "", ""); code != 200 {
		t.Fatalf("routes stopped serving after the manifest was deleted: %d", code)
	}
	write("name: four\nversion: \"4\"\nroutes:\n  - {path: /v1/four, method: GET, entity: system, action: get, auth: public}\n")
	waitFor("/v1/four", 200)
	if n := strings.Count(s.stderr.String(), "manifests cannot be read"); n != 1 {
		t.Errorf("the deleted manifest was reported %d times, want once", n)
	}
}

// TestSIGHUPWithoutManifestFiles: serve with neither --manifest nor
// --domain reloads on SIGHUP (the stored layers); the signal ended the
// process, as no handler was installed.
func TestSIGHUPWithoutManifestFiles(t *testing.T) {
	s := startProcess(t, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache})
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var gone bool
	var exit error
	testutil.Eventually(t, 30*time.Second, "SIGHUP to reload the manifests or end the process", func() bool {
		select {
		case exit = <-s.exited:
			gone = true
			return true
		default:
		}
		return strings.Contains(s.stderr.String(), "manifests reloaded")
	})
	if gone {
		t.Fatalf("serve exited on SIGHUP: %v\n%s", exit, s.stderr)
	}
	if code, body := s.do(t, "GET", "/health", "", ""); code != 200 {
		t.Fatalf("health after SIGHUP: %d %v", code, body)
	}
	s.stop(t)
}

func TestOpenAPICommand(t *testing.T) {
	t.Parallel()
	man, _ := filepath.Abs("../../manifests/gateway.yaml")
	stdout, stderr, code := cli(t, nil, "openapi", "--manifest", man)
	var doc map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &doc) != nil || doc["openapi"] != "3.0.3" {
		t.Fatalf("openapi: %d %s %.300s", code, stderr, stdout)
	}
	if _, ok := doc["paths"].(map[string]any)["/v1/accounts/{id}/deposits"]; !ok {
		t.Fatal("document lacks the manifest's emit route")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nversion: \"1\"\nroutes:\n  - {path: nope, method: GET, entity: account, action: get}\n"), 0o644)
	_, stderr, code = cli(t, nil, "openapi", "--manifest", bad)
	if code != 1 || !strings.Contains(stderr, bad+":4:") {
		t.Fatalf("bad manifest: %d %s", code, stderr)
	}
}

// TestShippedManifestsAreValid: every manifest in manifests/ and examples/
// passes factline check.
func TestShippedManifestsAreValid(t *testing.T) {
	t.Parallel()
	var files []string
	for _, glob := range []string{"../../manifests/*.yaml", "../../examples/*/*.yaml"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		stdout, stderr, code := cli(t, nil, "check", f)
		if code != 0 {
			t.Errorf("factline check %s: exit %d\n%s%s", f, code, stdout, stderr)
		}
	}
}

func TestPluginTestCommand(t *testing.T) {
	stdout, stderr, code := cli(t, nil, "plugin", "test", "--calls", "500", filepath.Join(pluginsDir, "asset.wasm"))
	if code != 0 || !strings.Contains(stdout, "PASS") || strings.Contains(stdout, "FAIL") {
		t.Fatalf("asset plugin: exit %d\n%s%s", code, stdout, stderr)
	}
	loop, err := conformance.Build(context.Background(), "../../sdk/conformance/testdata/loop")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "loop.wasm")
	os.WriteFile(f, loop, 0o644)
	stdout, stderr, code = cli(t, nil, "plugin", "test", "--calls", "500", f)
	if code != 1 || !strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, "deadline") {
		t.Fatalf("looping plugin: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, _, code = cli(t, nil, "plugin", "test"); code != 2 {
		t.Fatalf("no file: exit %d", code)
	}
}

// TestServeRefusesAnotherSecretKey: a second process on the same database
// without the first one's secret key (each then has a key file of its own)
// exits non-zero naming FACTLINE_SECRET_KEY, once the database holds a
// webhook secret; given the key through FACTLINE_SECRET_KEY it starts.
func TestServeRefusesAnotherSecretKey(t *testing.T) {
	db, dirA := testutil.Postgres(t), t.TempDir()
	admin, stderr, code := cli(t, nil, "keys", "create", "--tenant", "acme", "--mode", "admin", "--database-url", db, "--data-dir", dirA)
	admin = strings.TrimSpace(admin)
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	s := startServer(t, "--database-url", db, "--data-dir", dirA)
	s.waitReady(t) // a stop while plugins compile waits for them
	if code, body := s.do(t, "POST", "/v1/admin/webhooks/secrets", admin, ""); code != 201 {
		t.Fatalf("create secret: %d %v", code, body)
	}
	s.stop(t)

	_, stderr, code = cli(t, nil, "serve", "--addr", "127.0.0.1:0", "--domain", domainManifest(t), "--plugins-dir", pluginsDir,
		"--plugin-cache-dir", pluginCache, "--database-url", db, "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(stderr, "FACTLINE_SECRET_KEY") {
		t.Fatalf("serve with another key: exit %d, stderr %s", code, stderr)
	}

	key, err := os.ReadFile(filepath.Join(dirA, "webhook-secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FACTLINE_SECRET_KEY", strings.TrimSpace(string(key)))
	s = startServer(t, "--database-url", db, "--data-dir", t.TempDir())
	s.waitReady(t)
	s.stop(t)
}

// TestPluginTestInputFeedsReplay: --input COMMAND=JSON (repeatable) feeds
// the replay check; without an input the guide's points ledger records no
// fact, and replay says so with a WARN line while the exit code stays 0. A
// malformed --input is a usage error.
func TestPluginTestInputFeedsReplay(t *testing.T) {
	points, err := conformance.Build(context.Background(), "../../sdk/conformance/testdata/points")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "points.wasm")
	if err := os.WriteFile(f, points, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		lines []string // each a line prefix that must be printed
	}{
		{"no input", nil, 0, []string{"WARN replay           nothing to replay", "PASS: points@1.0.0 passes 10 checks, 1 with a warning"}},
		{"inputs", []string{"--input", `earn={"points":5}`, "--input", `earn={"points":0}`}, 0,
			[]string{"PASS replay           2 facts recorded", "PASS: points@1.0.0 passes 10 checks"}},
		{"no command", []string{"--input", `{"points":5}`}, 2, nil},
		{"not JSON", []string{"--input", `earn={points:5}`}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"plugin", "test", "--calls", "200"}, tc.args...), f)
			stdout, stderr, code := cli(t, nil, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.lines {
				found := false
				for line := range strings.Lines(stdout) {
					found = found || strings.HasPrefix(line, want)
				}
				if !found {
					t.Errorf("no line starts with %q:\n%s", want, stdout)
				}
			}
			if tc.code == 0 && tc.name == "no input" && strings.Contains(stdout, "PASS replay") {
				t.Errorf("replay with nothing to replay printed PASS:\n%s", stdout)
			}
		})
	}
}

// TestCheckLayersDomainManifests: several domain manifests are layered
// over the built-in one as serve does; a conflict is a problem at the
// layer's file:line:col, and a gateway manifest may use the added types.
func TestCheckLayersDomainManifests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	claims := filepath.Join(dir, "claims.yaml")
	os.WriteFile(claims, []byte("name: claims\nversion: \"1\"\nentities:\n  claim:\n    ledger: generic\n    fields:\n      status: {type: string, required: true, storage: ix_s_1}\n    facts: [opened]\n"), 0o644)
	retype := filepath.Join(dir, "retype.yaml")
	os.WriteFile(retype, []byte("name: retype\nversion: \"1\"\nentities:\n  claim:\n    ledger: generic\n    fields:\n      status: {type: number, required: true, storage: ix_n_1}\n    facts: [opened]\n"), 0o644)
	gw := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(gw, []byte("name: claims-api\nversion: \"1\"\nroutes:\n  - path: /claims\n    method: GET\n    entity: claim\n    action: list\n"), 0o644)
	if stdout, stderr, code := cli(t, nil, "check", domainManifest(t), claims); code != 0 {
		t.Fatalf("base and a layer: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, _, code := cli(t, nil, "check", claims, retype)
	if want := retype + ":7:7: entities.claim.fields.status: retypes field from string to number (declared at " + claims + ":7:7)"; code != 1 || !strings.Contains(stdout, want) {
		t.Fatalf("conflicting layers: exit %d\n%s\nwant %s", code, stdout, want)
	}
	if stdout, stderr, code := cli(t, nil, "check", "--domain", claims, gw); code != 0 {
		t.Fatalf("gateway on a layered type: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout, _, code := cli(t, nil, "check", gw); code != 1 || !strings.Contains(stdout, "claim") {
		t.Fatalf("gateway on an undeclared type: exit %d\n%s", code, stdout)
	}
}
