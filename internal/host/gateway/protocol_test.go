package gateway_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
)

// rawExchange writes raw bytes on a fresh connection to the harness's
// listener and reads one response. closed reports whether the server
// announced Connection: close and closed the connection after it.
func rawExchange(t *testing.T, h *harness, raw string) (r *response, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.listen(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	r = decode(t, "raw", "", resp)
	if !resp.Close {
		return r, false
	}
	_, err = br.ReadByte()
	var ne net.Error
	return r, err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestConflictingContentLengthIsRefused: differing Content-Length headers
// make the body's end ambiguous (RFC 9112 section 6.3): 400 and a closed
// connection, at once, instead of waiting for bytes that may never come.
// Repeats of one value are one length. Transfer-Encoding beside a
// Content-Length is refused the same way (RFC 9112 section 6.1: the
// connection must close after it), where fasthttp had let the chunked
// body win and kept the connection, and so is a Transfer-Encoding other
// than chunked (section 6.3; fasthttp decodes no other coding).
func TestConflictingContentLengthIsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	const conflicting = "Conflicting Content-Length headers: the request's length is ambiguous"
	const both = "Transfer-Encoding and Content-Length together: the request's length is ambiguous"
	const unended = "Transfer-Encoding other than chunked is not supported: the request's length is unknown"
	for _, tc := range []struct {
		name, lengths, body string
		detail              string // "" when the request is served
	}{
		{"2 then 3", "Content-Length: 2\r\nContent-Length: 3\r\n", "{}", conflicting},
		{"3 then 2", "Content-Length: 3\r\ncontent-length: 2\r\n", "{}x", conflicting},
		{"2 then 2", "Content-Length: 2\r\nContent-Length: 2\r\n", "{}", ""},
		{"chunked then length", "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n", "2\r\n{}\r\n0\r\n\r\n", both},
		{"length then chunked", "Content-Length: 2\r\ntransfer-encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n", both},
		{"chunked alone", "Transfer-Encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n", ""},
		{"gzip, chunked", "Transfer-Encoding: gzip, chunked\r\n", "2\r\n{}\r\n0\r\n\r\n", unended},
		{"chunked, gzip", "Transfer-Encoding: chunked, gzip\r\n", "2\r\n{}\r\n0\r\n\r\n", unended},
		{"identity", "Transfer-Encoding: identity\r\n", "{}", unended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := "POST /v1/facts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: " + h.keyA + "\r\n" +
				tc.lengths + "\r\n" + tc.body
			start := time.Now()
			r, closed := rawExchange(t, h, raw)
			if tc.detail == "" {
				// The body {} reaches the route, which wants entity_id.
				r.wantStatus(t, 400)
				if r.fieldErrors()["entity_id"] != "required" {
					t.Fatalf("accepted framing: %s", r.raw)
				}
				return
			}
			r.wantProblem(t, 400, "bad-request", "Bad Request", tc.detail)
			if !closed {
				t.Fatal("connection left open")
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("answered after %v", took)
			}
		})
	}
}

// TestOversizedHeadersAre431: headers beyond the read buffer are a 431
// problem with its own slug and title, not a 400.
func TestOversizedHeadersAre431(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	raw := "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
	r, closed := rawExchange(t, h, raw)
	r.wantProblem(t, 431, "request-header-fields-too-large", "Request Header Fields Too Large", "Request line and headers exceed the limit of 4096 bytes")
	if !closed {
		t.Fatal("connection left open")
	}
}

// TestStalledRequestIs408: a request whose headers or body stop arriving
// is answered 408 request-timeout when the request timeout runs out, and
// its connection closed: the client was slow, the request not malformed.
func TestStalledRequestIs408(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	var err error
	if h.srv, err = gateway.New(gateway.Config{DocsURL: docsURL, RequestTimeout: 300 * time.Millisecond}, h.deps); err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{
		"headers unended": "GET /v1/facts HTTP/1.1\r\nHost: x\r\nX-API-Key: " + h.keyA + "\r\n",
		"body short":      "POST /v1/facts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nX-API-Key: " + h.keyA + "\r\n\r\n{",
	} {
		t.Run(name, func(t *testing.T) {
			r, closed := rawExchange(t, h, raw)
			r.wantProblem(t, 408, "request-timeout", "Request Timeout", "The request took too long to arrive")
			if !closed {
				t.Fatal("connection left open")
			}
		})
	}
}

// TestMalformedRequestIsWordedForClients: what fasthttp cannot parse is a
// 400 problem in the product's words, never the parser's message.
func TestMalformedRequestIsWordedForClients(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	for _, raw := range []string{
		"POST /v1/facts HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
		"POST /v1/facts HTTP/1.1\r\nHost: x\r\nBad Key: v\r\n\r\n",
	} {
		r, _ := rawExchange(t, h, raw)
		r.wantProblem(t, 400, "bad-request", "Bad Request", "The request is not well-formed HTTP/1.1")
	}
}

// TestMultipartBodyIsUnsupportedMediaType: a multipart body sent to a JSON
// endpoint is a 415 naming the media type, whatever its parts; the
// multipart parser's errors never reach the client.
func TestMultipartBodyIsUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	for name, body := range map[string]string{
		"truncated": "--abc\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1",
		"empty":     "",
		"whole":     "--abc\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--abc--\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			raw := "POST /v1/facts HTTP/1.1\r\nHost: x\r\nX-API-Key: " + h.keyA + "\r\nContent-Type: multipart/form-data; boundary=abc\r\n" +
				"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
			r, _ := rawExchange(t, h, raw)
			r.wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", "Content-Type must be application/json (got multipart/form-data; boundary=abc)")
		})
	}
}

// TestUnknownMethodIsProblem: a method fiber does not know is answered
// like any method a path does not serve: 405 with Allow where the path
// exists, 404 where it does not, as problem+json.
func TestUnknownMethodIsProblem(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"FOO", "/v1/facts", 405, "GET, HEAD, POST"},
		{"PROPFIND", "/v1/entities/ent_x", 405, "GET, HEAD, PATCH"},
		{"PROPFIND", "/health", 405, "GET, HEAD"},
		{"FOO", "/nowhere", 404, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := h.req(tc.method, tc.path, h.keyA, nil)
			if tc.status == 405 {
				r.wantProblem(t, 405, "method-not-allowed", "Method Not Allowed", "Method "+tc.method+" is not allowed on "+tc.path)
			} else {
				r.wantProblem(t, 404, "not-found", "Not Found", "No route matches "+tc.method+" "+tc.path)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
}

// TestWrongMethodOnPlatformPathIs405: the platform's paths below an
// entity answer a method they do not serve with 405 and Allow, for an
// entity that exists and for one that does not.
func TestWrongMethodOnPlatformPathIs405(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).body["data"].(map[string]any)["id"])
	for _, ent := range []string{id, "ent_missing"} {
		for _, tc := range []struct{ method, path, allow string }{
			{"DELETE", "/v1/entities/" + ent, "GET, HEAD, PATCH"},
			{"PUT", "/v1/entities/" + ent, "GET, HEAD, PATCH"},
			{"POST", "/v1/entities/" + ent + "/facts", "GET, HEAD"},
		} {
			r := h.req(tc.method, tc.path, h.keyA, map[string]any{})
			r.wantProblem(t, 405, "method-not-allowed", "Method Not Allowed", "Method "+tc.method+" is not allowed on "+tc.path)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
			}
		}
	}
	// Other paths below an entity are left to its ledger's routes.
	h.req("POST", "/v1/entities/"+id+"/nothing", h.keyA, map[string]any{}).
		wantProblem(t, 404, "not-found", "Not Found", "No route matches POST /v1/entities/"+id+"/nothing")
}

// TestHeadAnswersLikeGet: every GET route, platform and manifest, answers
// HEAD with GET's status and headers and no body.
func TestHeadAnswersLikeGet(t *testing.T) {
	t.Parallel()
	h := setupGateway(t, "sqlite")
	// A mounted read (the webhook, plugin, operator and projection reads).
	h.srv.Mount(openapi.Endpoint{Method: "GET", Path: "/v1/mounted", ID: "mounted", Access: openapi.AnyKey, Status: 200, OK: "."},
		func(c *fiber.Ctx) error { return gateway.Respond(c, 200, fiber.Map{"items": []int{1, 2}}) })
	acc := h.account(t, h.keyA)
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).body["data"].(map[string]any)["id"])
	for _, path := range []string{
		"/v1/mounted", // mounted
		"/v1/entities/" + ent + "?entity_type=account", // platform
		"/v1/entities/" + ent + "/facts",               // platform
		"/v1/accounts/" + acc,                          // manifest get
		"/v1/accounts?limit=2",                         // manifest list
		"/v1/status",                                   // manifest, public
	} {
		get := h.req("GET", path, h.keyA, nil, "X-Request-Id", "same-id")
		head := h.req("HEAD", path, h.keyA, nil, "X-Request-Id", "same-id")
		if get.status != 200 || head.status != get.status {
			t.Fatalf("%s: GET %d, HEAD %d %s", path, get.status, head.status, head.raw)
		}
		if len(head.raw) != 0 {
			t.Fatalf("%s: HEAD has a body: %s", path, head.raw)
		}
		if k := "Content-Type"; head.header.Get(k) != get.header.Get(k) {
			t.Fatalf("%s: HEAD %s %q, GET %q", path, k, head.header.Get(k), get.header.Get(k))
		}
		// Each has a request id of its own (ids are per request).
		if hr, gr := head.header.Get("X-Request-Id"), get.header.Get("X-Request-Id"); hr == "" || hr == gr {
			t.Fatalf("%s: HEAD request id %q, GET %q", path, hr, gr)
		}
		// The envelope's timestamp has as many digits either way.
		if head.header.Get("Content-Length") != strconv.Itoa(len(get.raw)) {
			t.Fatalf("%s: HEAD Content-Length %q, GET body %d bytes", path, head.header.Get("Content-Length"), len(get.raw))
		}
	}
	// The manifest route's 405 lists HEAD beside GET.
	r := h.req("DELETE", "/v1/status", h.keyA, nil)
	if r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("DELETE /v1/status: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}

// TestPlatformPathsNeedAKeyOnAllPaths: the contract puts the platform's
// paths behind the key check on all paths, so a request without a key
// learns nothing of which paths and methods exist there; with a key, the
// same requests answer 404 or 405.
func TestPlatformPathsNeedAKeyOnAllPaths(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	for _, tc := range []struct {
		method, path string
		withKey      int
	}{
		{"GET", "/v1/facts/a/b", 404},
		{"GET", "/v1/configs/a/b/c", 404},
		{"DELETE", "/v1/facts", 405},
		{"PATCH", "/v1/configs", 405},
		{"GET", "/v1/entities/a/b/c/d", 404},
		{"FOO", "/v1/facts", 405},
		{"PROPFIND", "/v1/configs/x/versions/y", 405},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			h.req(tc.method, tc.path, "", nil).wantProblem(t, 401, "unauthorized", "Unauthorized", "Invalid or missing API key")
			h.req(tc.method, tc.path, "fl_live_not-a-key", nil).wantProblem(t, 401, "unauthorized", "Unauthorized", "Invalid or missing API key")
			if r := h.req(tc.method, tc.path, h.keyA, nil); r.status != tc.withKey {
				t.Errorf("with a key: %d, want %d", r.status, tc.withKey)
			}
		})
	}
	// Paths that only start like a platform prefix are not platform paths.
	h.req("GET", "/v1/factsheet", "", nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /v1/factsheet")
}
