package app_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
)

// The HTTP fuzz harness: valid requests to every write endpoint of the app
// as the binary wires it (platform API, the account ledger plugin's
// commands, manifest create, emit and query routes), mutated in their
// bodies, headers and paths and sent as raw bytes over TCP. The contract
// checked for every answer: valid input is a 2xx; anything else is a 4xx
// application/problem+json, never a 5xx; every answer comes within
// answerBound; a refused request leaves the tenant's stored data as it was.

// fuzzRoutes are manifest routes of each action the harness drives, with no
// rate limit (a 429 is not what it looks for).
const fuzzRoutes = `name: fuzz
version: "1"
routes:
  - {path: /v1/accounts, method: POST, entity: account, action: create}
  - {path: /v1/accounts/:id/deposits, method: POST, entity: account, action: emit, factType: deposit}
  - {path: /v1/tickets, method: POST, entity: ticket, action: create}
  - {path: /v1/tickets/:id/comments, method: POST, entity: ticket, action: emit, factType: commented}
  - {path: /v1/reports/calls, method: POST, entity: contact, action: query}
entities:
  ticket:
    fields:
      subject: {type: string, indexed: true}
      priority: {type: number, indexed: true}
    facts: [opened, commented, closed]
`

// answerBound is the longest a request may wait for its answer.
const answerBound = 5 * time.Second

// fuzzTenant is the tenant of the harness's key.
const fuzzTenant = "t1"

// fuzzSeed is the generator's seed; FACTLINE_HTTPFUZZ_SEED replays another.
var fuzzSeed = func() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("FACTLINE_HTTPFUZZ_SEED"), 10, 64); err == nil {
		return s
	}
	return 20261125
}()

// fuzzTarget is a running app with the entities the valid requests use.
type fuzzTarget struct {
	l       *live
	addr    string
	contact string // a contact (generic ledger)
	account string // an account (account ledger plugin)
	ticket  string // a ticket (manifest entity)
	config  string // a pricing config
	seq     atomic.Int64
}

func startFuzzTarget(t testing.TB, backend, loc string) *fuzzTarget {
	t.Helper()
	// A cache kept between runs: each fuzz worker is a process that would
	// otherwise compile the plugins again.
	wasmCache := filepath.Join(os.TempDir(), "factline-httpfuzz-wasm-cache")
	if err := precompileInto(wasmCache, slices.Collect(maps.Values(repoPlugins(t)))...); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, backend, loc, func(c *app.Config) {
		dir := t.TempDir()
		man := filepath.Join(dir, "gateway.yaml")
		if err := os.WriteFile(man, []byte(fuzzRoutes), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Manifest = man
		c.BodyLimit = 64 << 10
		c.PluginCacheDir = wasmCache
	})
	ft := &fuzzTarget{l: l, addr: strings.TrimPrefix(l.base, "http://"), contact: "c-base", account: "acct-base"}
	must := func(code int, body map[string]any) map[string]any {
		t.Helper()
		if code/100 != 2 {
			t.Fatalf("setup: %d %v", code, body)
		}
		return dataOf(body)
	}
	must(l.call("POST", "/v1/entities", l.key, map[string]any{"type": "contact", "id": ft.contact, "name": "Ada", "status": "active"}))
	must(l.call("POST", "/v1/entities", l.key, map[string]any{"type": "account", "id": ft.account, "name": "Acme", "status": "active", "subtype": "customer"}))
	must(l.call("POST", "/v1/entities/"+ft.account+"/deposit", l.key, map[string]any{"amount": "100.00"}))
	ft.ticket, _ = must(l.call("POST", "/v1/tickets", l.key, map[string]any{"data": map[string]any{"subject": "Broken", "priority": 2}}))["id"].(string)
	ft.config, _ = must(l.call("POST", "/v1/configs", l.key, map[string]any{"type": "pricing", "settings": map[string]any{"rate": 1}}))["id"].(string)
	must(l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "calls", "settings": map[string]any{
		"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour",
		"aggregations": []map[string]any{{"field": "count", "function": "count"}}, "materialize": false, "storageVersion": 1,
	}}))
	if ft.ticket == "" || ft.config == "" {
		t.Fatal("setup: no ticket or config id")
	}
	return ft
}

// wireReq is one request as it goes on the wire. Header order and
// repetitions are kept; Content-Length is added from the body unless a
// header sets it (noLength leaves it out).
type wireReq struct {
	method   string
	path     string
	header   [][2]string
	body     []byte
	noLength bool
	// short: the body sent is shorter than the Content-Length announced;
	// the write side is closed after it, and closing the connection
	// without an answer is then acceptable.
	short bool
}

func (r wireReq) clone() wireReq {
	r.header = slices.Clone(r.header)
	r.body = bytes.Clone(r.body)
	return r
}

func (r wireReq) has(name string) bool {
	for _, h := range r.header {
		if strings.EqualFold(h[0], name) {
			return true
		}
	}
	return false
}

func (r *wireReq) set(name, value string) {
	r.header = slices.DeleteFunc(r.header, func(h [2]string) bool { return strings.EqualFold(h[0], name) })
	r.header = append(r.header, [2]string{name, value})
}

func (r wireReq) bytes(host string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", r.method, r.path, host)
	for _, h := range r.header {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	if !r.noLength && !r.has("Content-Length") && !r.has("Transfer-Encoding") {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.body))
	}
	b.WriteString("\r\n")
	b.Write(r.body)
	return b.Bytes()
}

func (r wireReq) String() string {
	body := r.body
	if len(body) > 200 {
		body = append(body[:200:200], "..."...)
	}
	path := r.path
	if len(path) > 200 {
		path = path[:200] + "..."
	}
	return fmt.Sprintf("%s %s %q %q", r.method, path, r.header, body)
}

// endpoint builds a valid request to one write endpoint from the current
// state of the target.
type endpoint struct {
	name  string
	valid func(ft *fuzzTarget) wireReq
}

func jsonReq(ft *fuzzTarget, method, path string, body any) wireReq {
	r := wireReq{method: method, path: path, header: [][2]string{{"X-API-Key", ft.l.key}}}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		r.body = b
		r.header = append(r.header, [2]string{"Content-Type", "application/json"})
	}
	return r
}

// version is the stored version of an entity (0 when it cannot be read:
// the request then answers 409 or 404, which the checker accepts).
func (ft *fuzzTarget) version(id string) int64 {
	e, err := ft.l.a.Store.GetEntity(context.Background(), fuzzTenant, id)
	if err != nil {
		return 0
	}
	return e.Version
}

var endpoints = []endpoint{
	{"create entity", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/entities", map[string]any{"type": "contact", "id": fmt.Sprintf("c-%d", ft.seq.Add(1)), "name": "Grace", "status": "active", "email": "g@example.test"})
	}},
	{"update entity", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "PATCH", "/v1/entities/"+ft.contact, map[string]any{"version": ft.version(ft.contact), "name": "Ada L", "score": 3})
	}},
	{"append fact", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/facts", map[string]any{"entity_id": ft.contact, "type": "note", "data": map[string]any{"text": "called back", "n": 1}})
	}},
	{"create config", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/configs", map[string]any{"type": "pricing", "scope_type": "global", "settings": map[string]any{"rate": 1.5}})
	}},
	{"update config", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "PUT", "/v1/configs/"+ft.config, map[string]any{"settings": map[string]any{"rate": 2, "tier": "gold"}})
	}},
	{"archive config", func(ft *fuzzTarget) wireReq {
		// A config of its own, so that the archive is valid every time (if
		// it cannot be made, the archive of cfg_missing fails as invalid).
		id := "cfg_missing"
		a, err := ft.send(jsonReq(ft, "POST", "/v1/configs", map[string]any{"type": "pricing", "settings": map[string]any{"rate": 1}}))
		var body struct {
			Data struct{ ID string } `json:"data"`
		}
		if err == nil && a.status == 201 && json.Unmarshal(a.body, &body) == nil && body.Data.ID != "" {
			id = body.Data.ID
		}
		return jsonReq(ft, "DELETE", "/v1/configs/"+id, nil)
	}},
	{"ledger deposit", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/entities/"+ft.account+"/deposit", map[string]any{"amount": "12.50", "currency": "USD", "note": "top-up"})
	}},
	{"ledger charge", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/entities/"+ft.account+"/charge", map[string]any{"amount": "0.25", "allow_overdraft": true})
	}},
	{"manifest create", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/accounts", map[string]any{"data": map[string]any{"name": "Initech", "status": "active", "subtype": "partner"}})
	}},
	{"manifest emit", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/tickets/"+ft.ticket+"/comments", map[string]any{"data": map[string]any{"text": "still broken", "by": "ada"}})
	}},
	{"manifest emit ledger", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/accounts/"+ft.account+"/deposits", map[string]any{"data": map[string]any{"amount": "3.00"}})
	}},
	{"manifest query", func(ft *fuzzTarget) wireReq {
		return jsonReq(ft, "POST", "/v1/reports/calls", map[string]any{"projection": "calls", "filters": map[string]any{"mode": "compute", "aggregate": true}})
	}},
}

// answer is what came back for one request.
type answer struct {
	status int
	ctype  string
	body   []byte
	closed bool // the server closed the connection without an answer
	took   time.Duration
}

// send writes r as raw bytes on a new connection and reads one answer.
func (ft *fuzzTarget) send(r wireReq) (answer, error) {
	start := time.Now()
	conn, err := net.DialTimeout("tcp", ft.addr, answerBound)
	if err != nil {
		return answer{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(start.Add(answerBound))
	// A write error is not fatal: the server may answer and close before
	// reading a body it refuses.
	_, _ = conn.Write(r.bytes(ft.addr))
	if r.short {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: r.method})
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return answer{took: time.Since(start)}, fmt.Errorf("no answer within %v", answerBound)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return answer{closed: true, took: time.Since(start)}, nil
		}
		return answer{took: time.Since(start)}, fmt.Errorf("read the answer: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: body, took: time.Since(start)}
	if err != nil {
		return a, fmt.Errorf("read the answer's body: %w", err)
	}
	return a, nil
}

// digest sums up the tenant's stored data: every entity with its version,
// every config with its version and status, and the fact log's head.
func (ft *fuzzTarget) digest() (string, error) {
	ctx := context.Background()
	st := ft.l.a.Store
	h := sha256.New()
	for _, typ := range []string{"contact", "account", "ticket"} {
		es, err := st.ListEntities(ctx, store.EntityFilter{TenantID: fuzzTenant, Type: typ, Limit: 1 << 20})
		if err != nil {
			return "", fmt.Errorf("list %s entities: %w", typ, err)
		}
		for _, e := range es {
			fmt.Fprintf(h, "e %s %s %d\n", e.Type, e.ID, e.Version)
		}
	}
	cs, err := st.ListConfigs(ctx, store.ConfigFilter{TenantID: fuzzTenant, Limit: 1 << 20})
	if err != nil {
		return "", fmt.Errorf("list configs: %w", err)
	}
	for _, c := range cs {
		fmt.Fprintf(h, "c %s %d %s\n", c.ID, c.Version, c.Status)
	}
	head, err := st.HeadPosition(ctx)
	if err != nil {
		return "", fmt.Errorf("fact head: %w", err)
	}
	fmt.Fprintf(h, "f %d\n", head)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// check sends r and holds its answer to the contract; valid requests must
// succeed. It returns a description of the breach, or "".
func (ft *fuzzTarget) check(r wireReq, valid bool) string {
	before, err := ft.digest()
	if err != nil {
		return err.Error()
	}
	a, err := ft.send(r)
	if err != nil {
		return fmt.Sprintf("%v (after %v)", err, a.took.Round(time.Millisecond))
	}
	if a.took > answerBound {
		return fmt.Sprintf("answered after %v", a.took)
	}
	refused := a.closed || a.status/100 == 4
	switch {
	case a.closed && !r.short:
		return "connection closed without an answer"
	case valid && a.status/100 != 2:
		return fmt.Sprintf("valid request answered %d: %s", a.status, clip(a.body))
	case a.status >= 500:
		return fmt.Sprintf("answered %d: %s", a.status, clip(a.body))
	case !a.closed && a.status/100 != 2 && a.status/100 != 4:
		return fmt.Sprintf("answered %d, want 2xx or 4xx: %s", a.status, clip(a.body))
	case a.status/100 == 4 && !strings.HasPrefix(a.ctype, "application/problem+json"):
		return fmt.Sprintf("answered %d as %q, want application/problem+json: %s", a.status, a.ctype, clip(a.body))
	case a.status/100 == 4:
		var p struct {
			Status int    `json:"status"`
			Type   string `json:"type"`
		}
		if err := json.Unmarshal(a.body, &p); err != nil || p.Status != a.status || p.Type == "" {
			return fmt.Sprintf("answered %d with a problem that does not parse or match: %s", a.status, clip(a.body))
		}
	}
	if refused {
		after, err := ft.digest()
		if err != nil {
			return err.Error()
		}
		if after != before {
			return fmt.Sprintf("refused with %d (closed %v) but the stored data changed", a.status, a.closed)
		}
	}
	return ""
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// mutation turns a valid request into a probably invalid one.
type mutation struct {
	name   string
	mutate func(rng *rand.Rand, r wireReq) wireReq
}

// mutations are the classes the harness runs, each its own subtest.
var mutations = []mutation{
	{"body/truncate", func(rng *rand.Rand, r wireReq) wireReq {
		if len(r.body) == 0 {
			r.body = []byte("{")
		} else {
			r.body = r.body[:rng.IntN(len(r.body))]
		}
		return r
	}},
	{"body/flip bytes", func(rng *rand.Rand, r wireReq) wireReq {
		if len(r.body) == 0 {
			r.body = []byte(`{"a":1}`)
		}
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(r.body))
			r.body[i] ^= byte(1 << rng.IntN(8))
		}
		return r
	}},
	{"body/invalid utf-8", func(rng *rand.Rand, r wireReq) wireReq {
		junk := [][]byte{{0xff}, {0xc3, 0x28}, {0xed, 0xa0, 0x80}, {0xf8, 0x88, 0x80, 0x80, 0x80}, []byte(`\ud800`), []byte(`\udfff\ud800`)}
		return intoString(rng, r, junk[rng.IntN(len(junk))])
	}},
	{"body/nul", func(rng *rand.Rand, r wireReq) wireReq {
		if rng.IntN(2) == 0 {
			return intoString(rng, r, []byte(`\u0000`))
		}
		return intoString(rng, r, []byte{0})
	}},
	{"body/huge number", func(rng *rand.Rand, r wireReq) wireReq {
		nums := []string{"1e999999", "-1e400", "123456789012345678901234567890123456789", "0.000000000000000000000000000000000000001", "9223372036854775808", "-9223372036854775809", "1" + strings.Repeat("0", 5000), "1e-999999"}
		return replaceValue(rng, r, json.RawMessage(nums[rng.IntN(len(nums))]))
	}},
	{"body/deep nesting", func(rng *rand.Rand, r wireReq) wireReq {
		depth := 100 + rng.IntN(20000)
		open, close := "[", "]"
		if rng.IntN(2) == 0 {
			open, close = `{"a":`, "}"
		}
		v := strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth)
		return replaceValue(rng, r, json.RawMessage(v))
	}},
	{"body/huge string", func(rng *rand.Rand, r wireReq) wireReq {
		sizes := []int{4 << 10, 60 << 10, 70 << 10, 2 << 20}
		s, _ := json.Marshal(strings.Repeat("é", sizes[rng.IntN(len(sizes))]/2))
		return replaceValue(rng, r, json.RawMessage(s))
	}},
	{"body/wrong types", func(rng *rand.Rand, r wireReq) wireReq {
		vals := []string{`null`, `true`, `0`, `-1`, `1.5`, `""`, `"x"`, `[]`, `[1,"a"]`, `{}`, `{"a":null}`}
		return replaceValue(rng, r, json.RawMessage(vals[rng.IntN(len(vals))]))
	}},
	{"body/extra keys", func(rng *rand.Rand, r wireReq) wireReq {
		keys := []string{"__proto__", "", "a.b", "$where", "données", "id", "tenant_id", "version", strings.Repeat("k", 3000), "type"}
		vals := []string{`1`, `"x"`, `null`, `{"b":[1,2]}`, `"t2"`}
		var m map[string]json.RawMessage
		if json.Unmarshal(r.body, &m) != nil || m == nil {
			m = map[string]json.RawMessage{}
		}
		for range 1 + rng.IntN(3) {
			m[keys[rng.IntN(len(keys))]] = json.RawMessage(vals[rng.IntN(len(vals))])
		}
		r.body, _ = json.Marshal(m)
		return r
	}},
	{"header/content-type", func(rng *rand.Rand, r wireReq) wireReq {
		cts := []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz", "application/json; charset=latin1", "application/jsonx", "application/xml", "*/*", "", "application/json, text/plain", strings.Repeat("a", 2000), "application/\x7fjson"}
		ct := cts[rng.IntN(len(cts))]
		if ct == "" {
			r.header = slices.DeleteFunc(r.header, func(h [2]string) bool { return h[0] == "Content-Type" })
			if len(r.body) == 0 {
				r.body = []byte(`{}`)
			}
			return r
		}
		r.set("Content-Type", ct)
		return r
	}},
	{"header/content-length", func(rng *rand.Rand, r wireReq) wireReq {
		n := len(r.body)
		switch rng.IntN(6) {
		case 0:
			r.set("Content-Length", strconv.Itoa(n+1+rng.IntN(100)))
			r.short = true
		case 1:
			if n > 0 {
				r.set("Content-Length", strconv.Itoa(rng.IntN(n)))
			} else {
				r.set("Content-Length", "-1")
			}
		case 2:
			r.set("Content-Length", "-5")
		case 3:
			r.set("Content-Length", "12abc")
		case 4:
			r.header = append(r.header, [2]string{"Content-Length", strconv.Itoa(n)}, [2]string{"Content-Length", strconv.Itoa(n + 7)})
		default:
			r.header = append(r.header, [2]string{"Content-Length", strconv.Itoa(n)}, [2]string{"Transfer-Encoding", "chunked"})
		}
		return r
	}},
	{"header/duplicates", func(rng *rand.Rand, r wireReq) wireReq {
		switch rng.IntN(3) {
		case 0:
			r.header = append(r.header, [2]string{"X-API-Key", "fl_live_" + strings.Repeat("z", 20)})
		case 1:
			r.header = append(r.header, [2]string{"Content-Type", "text/plain"})
		default:
			r.header = append(r.header, [2]string{"Idempotency-Key", "one"}, [2]string{"Idempotency-Key", "two"})
		}
		return r
	}},
	{"header/idempotency-key", func(rng *rand.Rand, r wireReq) wireReq {
		keys := []string{strings.Repeat("k", 300), strings.Repeat("k", 5000), "\x01\x02", "clé-ü", " ", "a b\tc", "\xff\xfe"}
		r.set("Idempotency-Key", keys[rng.IntN(len(keys))])
		return r
	}},
	{"header/api-key", func(rng *rand.Rand, r wireReq) wireReq {
		var key string
		for _, h := range r.header {
			if h[0] == "X-API-Key" {
				key = h[1]
			}
		}
		keys := []string{"", "x", "_", "fl_", key + "x", key[:len(key)-1], strings.Repeat("a", 10000), "ключ_ключ", key + "\x00", "\xff\xfe_\xff"}
		r.set("X-API-Key", keys[rng.IntN(len(keys))])
		return r
	}},
	{"path/percent junk", func(rng *rand.Rand, r wireReq) wireReq {
		junk := []string{"%", "%z", "%zz", "%ff", "%c0%af", "%2f", "%25", "%e2%80%ae", "%ed%a0%80"}
		return intoPath(rng, r, junk[rng.IntN(len(junk))])
	}},
	{"path/nul", func(rng *rand.Rand, r wireReq) wireReq {
		return intoPath(rng, r, "%00")
	}},
	{"path/overlong", func(rng *rand.Rand, r wireReq) wireReq {
		sizes := []int{300, 2000, 9000, 70000}
		return intoPath(rng, r, strings.Repeat("a", sizes[rng.IntN(len(sizes))]))
	}},
	{"path/dots", func(rng *rand.Rand, r wireReq) wireReq {
		dots := []string{"/..", "/.", "/../..", "/%2e%2e", "//", "/./"}
		return intoPath(rng, r, dots[rng.IntN(len(dots))])
	}},
}

// intoString puts junk into a random string of the body (keys included).
func intoString(rng *rand.Rand, r wireReq, junk []byte) wireReq {
	var quotes []int
	for i, c := range r.body {
		if c == '"' {
			quotes = append(quotes, i)
		}
	}
	if len(quotes) == 0 {
		r.body = append(append([]byte(`{"type":"a`), junk...), `"}`...)
		return r
	}
	i := quotes[rng.IntN(len(quotes))] + 1
	r.body = slices.Concat(r.body[:i], junk, r.body[i:])
	return r
}

// replaceValue replaces a random value of the body (a top-level field or a
// field of a nested object) by v.
func replaceValue(rng *rand.Rand, r wireReq, v json.RawMessage) wireReq {
	var m map[string]json.RawMessage
	if json.Unmarshal(r.body, &m) != nil || len(m) == 0 {
		r.body, _ = json.Marshal(map[string]json.RawMessage{"data": v})
		return r
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	k := keys[rng.IntN(len(keys))]
	var inner map[string]json.RawMessage
	if json.Unmarshal(m[k], &inner) == nil && len(inner) > 0 && rng.IntN(2) == 0 {
		ik := slices.Sorted(func(yield func(string) bool) {
			for k := range inner {
				if !yield(k) {
					return
				}
			}
		})
		inner[ik[rng.IntN(len(ik))]] = v
		m[k], _ = json.Marshal(inner)
	} else {
		m[k] = v
	}
	r.body, _ = json.Marshal(m)
	return r
}

// intoPath puts junk at a random place of the path: inside or after a
// segment.
func intoPath(rng *rand.Rand, r wireReq, junk string) wireReq {
	var slashes []int
	for i, c := range r.path {
		if c == '/' {
			slashes = append(slashes, i)
		}
	}
	switch rng.IntN(3) {
	case 0:
		r.path += junk
	case 1:
		i := slashes[rng.IntN(len(slashes))] + 1
		r.path = r.path[:i] + junk + r.path[i:]
	default:
		i := slashes[len(slashes)-1]
		r.path = r.path[:i+1] + junk
	}
	return r
}

// TestHTTPFuzzWriteEndpoints runs the harness on both stores: requests per
// mutation class (each a subtest) from a seeded generator, plus the valid
// requests themselves. Set FACTLINE_HTTPFUZZ_SEED to replay another seed.
func TestHTTPFuzzWriteEndpoints(t *testing.T) {
	// Its backends are two parallel tests (-parallel is the core count);
	// answerBound leaves room for a request that waits on the other.
	t.Parallel()
	const perClass = 40
	t.Logf("seed %d", fuzzSeed)
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ft := startFuzzTarget(t, backend, location(t, backend))
			t.Run("valid", func(t *testing.T) {
				for i, ep := range endpoints {
					for range 3 {
						r := ep.valid(ft)
						if msg := ft.check(r, true); msg != "" {
							t.Errorf("%s (%d): %s\n  request: %s", ep.name, i, msg, r)
						}
					}
				}
			})
			for mi, m := range mutations {
				t.Run(m.name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(fuzzSeed, uint64(mi)))
					fails := 0
					for i := range perClass {
						ep := endpoints[(i+rng.IntN(2))%len(endpoints)]
						r := m.mutate(rng, ep.valid(ft).clone())
						if msg := ft.check(r, false); msg != "" {
							fails++
							if fails <= 5 {
								t.Errorf("%s: %s\n  request: %s", ep.name, msg, r)
							}
						}
					}
					if fails > 5 {
						t.Errorf("%d of %d requests broke the contract (first 5 shown)", fails, perClass)
					}
				})
			}
		})
	}
}

// FuzzHTTPWrite mutates a request to one of the write endpoints (chosen by
// the first input) in its method, path suffix, Content-Type and body, and
// holds the answer to the harness's contract. It runs on SQLite only: each
// fuzz worker is a process of its own, and one throwaway Postgres server per
// worker would spend the fuzzing time starting up; the seeded test covers
// Postgres.
func FuzzHTTPWrite(f *testing.F) {
	ft := startFuzzTarget(f, "sqlite", f.TempDir())
	for i, ep := range endpoints {
		r := ep.valid(ft)
		f.Add(uint8(i), "", "application/json", r.body)
		f.Add(uint8(i), "%00", "application/json", r.body)
		f.Add(uint8(i), "/..", "text/plain", r.body)
		f.Add(uint8(i), "", "application/json", append(bytes.Clone(r.body), 0xff))
	}
	f.Add(uint8(0), "", "application/json", []byte(`{"type":"contact","name":"`+"\x00"+`","status":"active"}`))
	f.Add(uint8(2), "", "application/json", []byte(`{"entity_id":"c-base","type":"note","data":{"n":1e999999}}`))
	f.Fuzz(func(t *testing.T, which uint8, suffix, ctype string, body []byte) {
		ep := endpoints[int(which)%len(endpoints)]
		r := ep.valid(ft)
		// Spaces and line breaks would make another request line or
		// header, not a mutated one.
		r.path += strings.NewReplacer(" ", "%20", "\r", "%0D", "\n", "%0A").Replace(suffix)
		r.body = body
		r.set("Content-Type", strings.NewReplacer("\r", "", "\n", "").Replace(ctype))
		if msg := ft.check(r, false); msg != "" {
			t.Fatalf("%s: %s\n  request: %s", ep.name, msg, r)
		}
	})
}
