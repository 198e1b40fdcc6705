package main_test

// TestGuide follows sdk/README.md literally: it writes the files the guide
// shows, runs its shell commands, starts the gateway the guide starts and
// sends its curl calls, on SQLite and on Postgres. The conventions the
// guide's source follows are stated in an HTML comment at its top.
//
// What it cannot do literally, and does instead:
//   - The guide's module requires Factline from the checkout $FACTLINE
//     names; the test sets it to this checkout. Go runs with GOPROXY=off
//     and GOSUMDB=off: nothing is downloaded or looked up.
//   - `factline` is this package's build of the command, first on PATH.
//   - `factline serve` listens on 127.0.0.1:0 instead of its --addr, and
//     `--data-dir ./data` becomes the store under test (a fresh data dir,
//     plus --database-url for Postgres); curl's localhost:8080 becomes the
//     address the gateway listens on.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

const guidePath = "../../sdk/README.md"

// guideRequire is the guide's command that points the module at a
// checkout of Factline.
const guideRequire = "go mod edit -require=github.com/factline/factline@v0.0.0 -replace=github.com/factline/factline=$FACTLINE"

// guideBlock is one fenced code block of the guide.
type guideBlock struct {
	lang string
	file string // from a `<!-- file: NAME -->` line right before the fence
	text string
	line int // of the opening fence
}

var fileMarkerRe = regexp.MustCompile(`^<!--\s*file:\s*(\S+)\s*-->$`)

// parseGuide returns the fenced blocks of a guide in order. Every block
// that is not a shell block must name its file, so none goes untested.
func parseGuide(src string) ([]guideBlock, error) {
	var blocks []guideBlock
	lines := strings.Split(src, "\n")
	prev := "" // the last non-blank line before the current one
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "```") {
			if l != "" {
				prev = l
			}
			continue
		}
		b := guideBlock{lang: strings.TrimPrefix(l, "```"), line: i + 1}
		if m := fileMarkerRe.FindStringSubmatch(prev); m != nil {
			b.file = m[1]
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: unclosed code block", b.line)
		}
		b.text = strings.Join(body, "\n") + "\n"
		if b.lang != "sh" && b.file == "" {
			return nil, fmt.Errorf("line %d: a %q block needs a `<!-- file: NAME -->` line before it", b.line, b.lang)
		}
		blocks = append(blocks, b)
		prev = ""
	}
	return blocks, nil
}

// shellLines joins continued lines and drops blank and comment lines.
func shellLines(text string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\")
			continue
		}
		l = strings.TrimSpace(cur + l)
		cur = ""
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// shellWords splits a command line as sh would for the subset the guide
// uses: words, single and double quotes, $VAR and ${VAR} (not inside
// single quotes), and a trailing `# comment`, returned apart.
func shellWords(line string, vars map[string]string) (words []string, comment string, err error) {
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	expand := func(s string, i int) (int, error) { // s[i] == '$'
		var name string
		end := i + 1
		if end < len(s) && s[end] == '{' {
			j := strings.IndexByte(s[end:], '}')
			if j < 0 {
				return 0, fmt.Errorf("unclosed ${ in %q", line)
			}
			name, end = s[end+1:end+j], end+j+1
		} else {
			for end < len(s) && (s[end] == '_' || s[end] >= 'A' && s[end] <= 'Z' || s[end] >= 'a' && s[end] <= 'z' || s[end] >= '0' && s[end] <= '9') {
				end++
			}
			name = s[i+1 : end]
		}
		v, ok := vars[name]
		if !ok {
			return 0, fmt.Errorf("$%s is not set by an earlier line of the guide", name)
		}
		w.WriteString(v)
		return end, nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
			i++
		case c == '#' && !inWord:
			flush()
			return words, strings.TrimSpace(line[i+1:]), nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, "", fmt.Errorf("unclosed ' in %q", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+j+2
		case c == '"':
			inWord = true
			for i++; i < len(line) && line[i] != '"'; {
				switch {
				case line[i] == '\\' && i+1 < len(line) && strings.IndexByte(`$"\`, line[i+1]) >= 0:
					w.WriteByte(line[i+1])
					i += 2
				case line[i] == '$':
					if i, err = expand(line, i); err != nil {
						return nil, "", err
					}
				default:
					w.WriteByte(line[i])
					i++
				}
			}
			if i == len(line) {
				return nil, "", fmt.Errorf("unclosed \" in %q", line)
			}
			i++
		case c == '$':
			inWord = true
			if i, err = expand(line, i); err != nil {
				return nil, "", err
			}
		case c == '\\' && i+1 < len(line):
			w.WriteByte(line[i+1])
			inWord, i = true, i+2
		default:
			w.WriteByte(c)
			inWord, i = true, i+1
		}
	}
	flush()
	return words, "", nil
}

// guideCall is one curl line of the guide as an HTTP request, with what
// its comment says the answer is.
type guideCall struct {
	line    string
	method  string
	url     string // as written: localhost:8080/...
	header  http.Header
	body    []byte
	status  int    // 0: any 2xx
	contain string // JSON the answer's data holds, or ""
}

var expectRe = regexp.MustCompile(`^([1-5][0-9][0-9])\b\s*(\{.*\})?`)

// parseCurl reads the curl options the guide uses the way curl does: -d
// without a Content-Type header sends application/x-www-form-urlencoded,
// and a body makes the default method POST. dir resolves @file.
func parseCurl(line string, vars map[string]string, dir string) (*guideCall, error) {
	words, comment, err := shellWords(line, vars)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 || words[0] != "curl" {
		return nil, fmt.Errorf("not a curl call: %q", line)
	}
	c := &guideCall{line: line, header: http.Header{}}
	hasBody := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		arg := func() (string, error) {
			if i+1 >= len(words) {
				return "", fmt.Errorf("%s needs a value in %q", w, line)
			}
			i++
			return words[i], nil
		}
		switch w {
		case "-s", "-S", "-sS", "--silent", "--show-error", "-f", "--fail":
		case "-X", "--request":
			if c.method, err = arg(); err != nil {
				return nil, err
			}
		case "-H", "--header":
			h, err := arg()
			if err != nil {
				return nil, err
			}
			k, v, ok := strings.Cut(h, ":")
			if !ok {
				return nil, fmt.Errorf("header %q without a colon in %q", h, line)
			}
			c.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		case "-d", "--data", "--data-raw", "--data-binary":
			d, err := arg()
			if err != nil {
				return nil, err
			}
			var b []byte
			if name, ok := strings.CutPrefix(d, "@"); ok && w != "--data-raw" {
				if b, err = os.ReadFile(filepath.Join(dir, name)); err != nil {
					return nil, fmt.Errorf("%q: %w", line, err)
				}
				if w != "--data-binary" { // curl drops newlines of -d @file
					b = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r"), nil), []byte("\n"), nil)
				}
			} else {
				b = []byte(d)
			}
			if hasBody {
				c.body = append(c.body, '&')
			}
			c.body, hasBody = append(c.body, b...), true
		default:
			if strings.HasPrefix(w, "-") {
				return nil, fmt.Errorf("curl option %s is not one the guide test knows, in %q", w, line)
			}
			if c.url != "" {
				return nil, fmt.Errorf("two URLs in %q", line)
			}
			c.url = w
		}
	}
	if c.url == "" {
		return nil, fmt.Errorf("no URL in %q", line)
	}
	if c.method == "" {
		c.method = "GET"
		if hasBody {
			c.method = "POST"
		}
	}
	if hasBody && c.header.Get("Content-Type") == "" {
		c.header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if m := expectRe.FindStringSubmatch(comment); m != nil {
		c.status, _ = strconv.Atoi(m[1])
		c.contain = m[2]
	}
	return c, nil
}

// guideTarget is the URL of a guide's curl on the gateway at base.
func guideTarget(raw, base string) (string, error) {
	rest := strings.TrimPrefix(raw, "http://")
	for _, host := range []string{"localhost:8080", "127.0.0.1:8080"} {
		if p, ok := strings.CutPrefix(rest, host); ok {
			return base + p, nil
		}
	}
	return "", fmt.Errorf("curl to %s: the guide's gateway listens on localhost:8080", raw)
}

// containsJSON reports whether got holds every key and value of want.
func containsJSON(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !containsJSON(v, g[k]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}

var (
	keysLineRe  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=\$\((factline keys .*)\)$`)
	serveLineRe = regexp.MustCompile(`^factline serve\b`)
)

// isGatewayLine tells the lines the test plays against a gateway from the
// ones bash runs.
func isGatewayLine(l string) bool {
	return serveLineRe.MatchString(l) || keysLineRe.MatchString(l) || strings.HasPrefix(l, "curl ")
}

func TestGuide(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseGuide(string(src))
	if err != nil {
		t.Fatalf("sdk/README.md: %v", err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}

	// bin holds `factline` for the guide's shell commands.
	bin := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "factline")); err != nil {
		t.Fatal(err)
	}
	// GOSUMDB=off: with GOPROXY=off the checksum database would be asked
	// directly, over the network; the modules come from the local cache,
	// checked against this repository's go.sum when they were downloaded.
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=", "FACTLINE="+repo)

	// The module's part of the guide runs once, in document order; the
	// gateway lines are kept for each store.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir() // the empty directory the guide starts from
	var gateway []string
	requires := 0
	start := time.Now()
	for _, b := range blocks {
		where := fmt.Sprintf("sdk/README.md:%d", b.line)
		if b.file != "" {
			if err := os.WriteFile(filepath.Join(dir, b.file), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var script []string
		for _, l := range shellLines(b.text) {
			if isGatewayLine(l) {
				gateway = append(gateway, where+"\t"+l)
				continue
			}
			if strings.Contains(l, guideRequire) {
				requires++
			}
			script = append(script, l)
		}
		if len(script) == 0 {
			continue
		}
		if len(gateway) > 0 {
			t.Fatalf("%s: a shell command after the gateway lines; the test runs the module's commands once, before starting gateways", where)
		}
		state := filepath.Join(t.TempDir(), "pwd")
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\ncd \"$0\"\n"+strings.Join(script, "\n")+"\npwd > \"$1\"", dir, state)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", where, err, strings.Join(script, "\n"), out)
		}
		pwd, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		dir = strings.TrimSpace(string(pwd))
	}
	if requires != 1 {
		t.Fatalf("the guide runs %q %d times, want once", guideRequire, requires)
	}
	t.Logf("the module's commands took %v", time.Since(start).Round(time.Millisecond))
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range []string{"github.com/prometheus/", "github.com/gofiber/", "github.com/valyala/"} {
		if bytes.Contains(sum, []byte(dep)) {
			t.Errorf("the plugin module's go.sum lists %s:\n%s", dep, sum)
		}
	}
	if len(gateway) == 0 {
		t.Fatal("the guide has no gateway lines (factline serve, keys, curl)")
	}

	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			store := []string{"--data-dir", t.TempDir()}
			if backend == "postgres" {
				store = append(store, "--database-url", testutil.Postgres(t))
			}
			playGateway(t, gateway, dir, store)
		})
	}
}

// playGateway plays the guide's gateway lines with the store flags store
// in place of `--data-dir ./data`.
func playGateway(t *testing.T, lines []string, dir string, store []string) {
	vars := map[string]string{}
	var s *server
	client := &http.Client{Timeout: 2 * time.Minute}
	for _, wl := range lines {
		where, l, _ := strings.Cut(wl, "\t")
		switch {
		case serveLineRe.MatchString(l):
			words, _, err := shellWords(l, vars)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			args := append(guideStoreArgs(words[1:], store), "--plugin-cache-dir", pluginCache)
			for i, a := range args {
				if a == "--addr" && i+1 < len(args) {
					args[i+1] = "127.0.0.1:0"
				}
			}
			gw := startProcess(t, args)
			t.Cleanup(func() { gw.stop(t) })
			waitGuideReady(t, gw)
			s = gw
		case keysLineRe.MatchString(l):
			m := keysLineRe.FindStringSubmatch(l)
			words, _, err := shellWords(m[2], vars)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			out, stderr, code := cli(t, nil, guideStoreArgs(words[1:], store)...)
			if code != 0 {
				t.Fatalf("%s: %s exited %d: %s", where, l, code, stderr)
			}
			vars[m[1]] = strings.TrimSpace(out)
		default:
			if s == nil {
				t.Fatalf("%s: a curl before `factline serve`", where)
			}
			c, err := parseCurl(l, vars, dir)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			url, err := guideTarget(c.url, s.base)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			req, err := http.NewRequestWithContext(t.Context(), c.method, url, bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = c.header
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if c.status != 0 && resp.StatusCode != c.status || c.status == 0 && resp.StatusCode/100 != 2 {
				t.Fatalf("%s: %s\nanswered %d: %s", where, l, resp.StatusCode, raw)
			}
			if c.contain != "" {
				var want, got any
				if err := json.Unmarshal([]byte(c.contain), &want); err != nil {
					t.Fatalf("%s: the comment's JSON: %v", where, err)
				}
				var body map[string]any
				if err := json.Unmarshal(raw, &body); err != nil {
					t.Fatalf("%s: the answer is not JSON: %v: %s", where, err, raw)
				}
				got = body
				if d, ok := body["data"]; ok {
					got = d
				}
				if !containsJSON(want, got) {
					t.Fatalf("%s: %s\nanswered %s, which does not hold %s", where, l, raw, c.contain)
				}
			}
		}
	}
}

// guideStoreArgs replaces `--data-dir ./data` in a factline command's
// arguments with the store under test.
func guideStoreArgs(args, store []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--data-dir" && i+1 < len(args) {
			out = append(out, store...)
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// waitGuideReady polls /ready as an operator would before the first call.
func waitGuideReady(t *testing.T, s *server) {
	t.Helper()
	testutil.EventuallyNil(t, 2*time.Minute, func() error {
		resp, err := http.Get(s.base + "/ready")
		if err != nil {
			return fmt.Errorf("/ready: %v\n%s", err, s.stderr)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("/ready answered %d\n%s", resp.StatusCode, s.stderr)
		}
		return nil
	})
}

// TestGuideCurlAsHTTP: a guide's curl becomes the request curl would send,
// with its expected answer from the trailing comment.
func TestGuideCurlAsHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte("a: 1\nb: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"KEY": "fl_live_x", "OP": "fl_admin_y"}
	for _, tc := range []struct {
		line               string
		method, url, ctype string
		key, body          string
		status             int
		contain            string
	}{
		{line: `curl localhost:8080/v1/entities/m1/points -H "X-API-Key: $KEY"   # 200 {"points":30}`,
			method: "GET", url: "localhost:8080/v1/entities/m1/points", key: "fl_live_x", status: 200, contain: `{"points":30}`},
		{line: `curl -X POST localhost:8080/v1/entities/m1/earn -H "X-API-Key: ${KEY}" -H 'Content-Type: application/json' -d '{"points":30}'   # 201`,
			method: "POST", url: "localhost:8080/v1/entities/m1/earn", ctype: "application/json", key: "fl_live_x", body: `{"points":30}`, status: 201},
		{line: `curl -s -X PUT localhost:8080/v1/admin/domain/m -H "X-API-Key: $OP" --data-binary @m.yaml`,
			method: "PUT", url: "localhost:8080/v1/admin/domain/m", ctype: "application/x-www-form-urlencoded", key: "fl_admin_y", body: "a: 1\nb: 2\n"},
		{line: `curl localhost:8080/x -d @m.yaml # a comment, not an expectation`,
			method: "POST", url: "localhost:8080/x", ctype: "application/x-www-form-urlencoded", body: "a: 1b: 2"},
	} {
		c, err := parseCurl(tc.line, vars, dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if c.method != tc.method || c.url != tc.url || c.header.Get("Content-Type") != tc.ctype || c.header.Get("X-API-Key") != tc.key ||
			string(c.body) != tc.body || c.status != tc.status || c.contain != tc.contain {
			t.Errorf("%s:\n got %s %s type %q key %q body %q status %d contain %q", tc.line,
				c.method, c.url, c.header.Get("Content-Type"), c.header.Get("X-API-Key"), c.body, c.status, c.contain)
		}
	}
	for _, bad := range []string{
		`curl localhost:8080/v1 -H "X-API-Key: $ADMIN"`, // a variable no line set
		`curl -u me:pw localhost:8080/v1`,               // an option the test does not play
		`curl -X POST`,                                  // no URL
		`curl localhost:8080/v1 -H 'X-API-Key: x`,       // unclosed quote
	} {
		if _, err := parseCurl(bad, vars, dir); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestGuideBlocksNeedAFile: every block but a shell one names the file it
// goes to, so none of the guide goes untested.
func TestGuideBlocksNeedAFile(t *testing.T) {
	t.Parallel()
	blocks, err := parseGuide("intro\n\n<!-- file: main.go -->\n```go\npackage main\n```\n\n```sh\ngo test ./...\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].file != "main.go" || blocks[0].text != "package main\n" || blocks[1].lang != "sh" || blocks[1].file != "" {
		t.Fatalf("blocks: %+v", blocks)
	}
	for _, bad := range []string{
		"`main.go`:\n\n```go\npackage main\n```\n",
		"<!-- file: a.yaml -->\nprose in between\n```yaml\na: 1\n```\n",
		"<!-- file: main.go -->\n```go\npackage main\n",
	} {
		if _, err := parseGuide(bad); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// TestGuideGatewayLines: the lines played against a gateway are serve, a
// key assignment and curl; the rest runs in bash.
func TestGuideGatewayLines(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]bool{
		"factline serve --addr :8080 --data-dir ./data":                               true,
		"OP=$(factline keys create --tenant operator --mode admin --data-dir ./data)": true,
		`curl localhost:8080/ready`:                                                   true,
		"factline plugin test points.wasm":                                            false,
		"go test ./...":                                                               false,
	} {
		if got := isGatewayLine(line); got != want {
			t.Errorf("%s: gateway line %v, want %v", line, got, want)
		}
	}
	got := guideStoreArgs([]string{"keys", "create", "--data-dir", "./data", "--mode", "live"}, []string{"--data-dir", "/tmp/d", "--database-url", "postgres://x"})
	if want := []string{"keys", "create", "--data-dir", "/tmp/d", "--database-url", "postgres://x", "--mode", "live"}; !reflect.DeepEqual(got, want) {
		t.Errorf("store args %q, want %q", got, want)
	}
}
