package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/console"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// setup starts an app (SQLite in a temp dir unless cfg names a database).
func setup(t *testing.T, cfg app.Config) *app.App {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	// No plugins are loaded: the built-in ledger serves the default
	// domain's types, whose facts the console shows.
	cfg.StandInLedgers = true
	if cfg.SecretKey == "" {
		cfg.SecretKey = strings.Repeat("ab", 32)
	}
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func newKey(t *testing.T, a *app.App, tenant, mode string) (string, string) {
	t.Helper()
	key, rec, err := auth.CreateKey(context.Background(), a.Store, tenant, mode, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return key, rec.ID
}

func do(t *testing.T, a *app.App, method, path, cookie string, form url.Values) *http.Response {
	t.Helper()
	return doAccepting(t, a, method, path, cookie, form, "")
}

// browse is a browser's GET of a console page: it asks for text/html.
func browse(t *testing.T, a *app.App, path, cookie string) *http.Response {
	t.Helper()
	return doAccepting(t, a, "GET", path, cookie, nil, "text/html,application/xhtml+xml,*/*;q=0.8")
}

// doAccepting is do with an Accept header ("" for none).
func doAccepting(t *testing.T, a *app.App, method, path, cookie string, form url.Values, accept string) *http.Response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		r.Header.Set("Cookie", console.CookieName+"="+cookie)
	}
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	resp, err := a.Server.App().Test(r, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// reveal follows a write that made a secret: the answer redirects to the
// reveal page with the secret sealed in a cookie, and the page shows it.
// It returns the page's answer.
func reveal(t *testing.T, a *app.App, resp *http.Response, cookie string) *http.Response {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/reveal" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("a write that made a secret: %d to %q, want 303 to /console/reveal\n%s", resp.StatusCode, resp.Header.Get("Location"), b)
	}
	var sealed *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Path == "/console/reveal" {
			sealed = c
		}
	}
	if sealed == nil || !sealed.HttpOnly || sealed.SameSite != http.SameSiteStrictMode || sealed.MaxAge <= 0 || sealed.MaxAge > 300 {
		t.Fatalf("the reveal cookie %+v: want HttpOnly, SameSite=Strict, short-lived", sealed)
	}
	r := httptest.NewRequest("GET", "/console/reveal", nil)
	r.Header.Set("Cookie", console.CookieName+"="+cookie+"; "+sealed.Name+"="+sealed.Value)
	page, err := a.Server.App().Test(r, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { page.Body.Close() })
	return page
}

func sessionCookie(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", console.CookieName, resp.Header["Set-Cookie"])
	return nil
}

// signIn returns the session cookie's value and the CSRF token of a page.
func signIn(t *testing.T, a *app.App, key string) (cookie, csrf string) {
	t.Helper()
	resp := do(t, a, "POST", "/console/sign-in", "", url.Values{"key": {key}})
	if resp.StatusCode != http.StatusSeeOther {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("sign in: %d %s", resp.StatusCode, b)
	}
	cookie = sessionCookie(t, resp).Value
	page := do(t, a, "GET", "/console/webhooks", cookie, nil)
	b, _ := io.ReadAll(page.Body)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no CSRF token in the page (%d):\n%s", page.StatusCode, b)
	}
	return cookie, string(m[1])
}

func TestSessionCookieFlags(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	resp := do(t, a, "POST", "/console/sign-in", "", url.Values{"key": {key}})
	c := sessionCookie(t, resp)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/console" {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/console", c)
	}
	// The cookie outlives its 8-hour session by a day: a browser still
	// sends it after the session expired, and the sign-in page it is
	// sent to says the session ended (as for a revoked key, below).
	if left := time.Until(c.Expires); left < 31*time.Hour || left > 32*time.Hour+time.Minute {
		t.Errorf("cookie expires %v (in %v): want a day after the session's 8 hours", c.Expires, left)
	}
	if len(c.Value) < 43 || strings.Contains(c.Value, key) {
		t.Errorf("cookie value %q: want a random 256-bit token, not the key", c.Value)
	}
	if loc := resp.Header.Get("Location"); strings.Contains(loc, key) {
		t.Errorf("the key appears in the redirect %q", loc)
	}
}

func TestSignInWithBadKeyIsRefused(t *testing.T) {
	a := setup(t, app.Config{})
	form := url.Values{"key": {"fl_live_" + strings.Repeat("x", 43)}}
	resp := doAccepting(t, a, "POST", "/console/sign-in", "", form, "text/html")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "Invalid or missing API key") || !strings.Contains(string(b), `id="key"`) {
		t.Fatalf("a browser signing in with an unknown key: %d %s, want the form with the refusal", resp.StatusCode, b)
	}
	resp = do(t, a, "POST", "/console/sign-in", "", form)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(string(b), "Invalid or missing API key") {
		t.Fatalf("a client signing in with an unknown key: %d %s %s, want a 401 problem", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if len(resp.Cookies()) != 0 {
		t.Errorf("cookies set on a refused sign-in: %v", resp.Cookies())
	}
}

func TestWriteWithoutCSRFTokenIsRefused(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, key)
	for name, form := range map[string]url.Values{
		"missing": {},
		"wrong":   {"csrf": {csrf + "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			resp := do(t, a, "POST", "/console/dead-letters/dlv_x/replay", cookie, form)
			if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
				t.Fatalf("replay with a %s CSRF token: %d %s, want a 403 problem", name, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		})
	}
	// With the token, the request reaches the API (which knows no such delivery).
	resp := do(t, a, "POST", "/console/dead-letters/dlv_x/replay", cookie, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("replay with the CSRF token: %d, want the API's 404", resp.StatusCode)
	}
}

// What the gateway refuses before a console page runs reads as a console
// page in a browser (a request that accepts text/html), and stays
// problem+json for any other client.
func TestRefusalsBeforeAPageArePages(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, _ := signIn(t, a, key)
	send := func(method, path, cookie, accept string, body io.Reader) *http.Response {
		r := httptest.NewRequest(method, path, body)
		if body != nil {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != "" {
			r.Header.Set("Cookie", console.CookieName+"="+cookie)
		}
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		resp, err := a.Server.App().Test(r, -1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	big := "csrf=x&pad=" + strings.Repeat("a", 2<<20)
	for _, tc := range []struct {
		name, method, path, cookie string
		body                       string
		status                     int
		says                       string
	}{
		{"bad CSRF token", "POST", "/console/keys", cookie, "csrf=wrong", 403, "Missing or invalid CSRF token"},
		{"unknown page", "GET", "/console/no-such-page", cookie, "", 404, "No route matches"},
		{"oversized body", "POST", "/console/keys", cookie, big, 413, "Payload Too Large"},
		{"method the page does not take", "DELETE", "/console/keys", cookie, "", 405, "Method Not Allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			resp := send(tc.method, tc.path, tc.cookie, browser, body)
			page := read(t, resp)
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
				!strings.Contains(page, `<div class="problem" role="alert" id="problem">`) || !strings.Contains(page, tc.says) ||
				!strings.Contains(page, `<link rel="stylesheet" href="/console/assets/console.css">`) || !strings.Contains(page, "Trace id") {
				t.Fatalf("browser: %d %s, want a %d console page saying %q:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, tc.says, page)
			}
			if tc.status == 401 && !strings.Contains(page, `href="/console/sign-in"`) {
				t.Errorf("the 401 page has no sign-in link:\n%s", page)
			}
			// A signed-in user keeps the way to every view.
			if signedIn := tc.cookie != ""; signedIn != strings.Contains(page, `id="nav-webhooks"`) {
				t.Errorf("signed in %v, but the navigation shown is %v:\n%s", signedIn, !signedIn, page)
			}
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			resp = send(tc.method, tc.path, tc.cookie, "", body)
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
				t.Fatalf("API client: %d %s, want a %d problem", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status)
			}
		})
	}
	// A form sent without a session: a browser is sent to sign in and
	// back to the page the form was on, told when its session ended; any
	// other client gets the 401 as problem+json. (A browser had a bare
	// 401 page, with a sign-in link that led nowhere back.)
	for _, tc := range []struct {
		cookie string
		ended  bool
	}{{"", false}, {"no-such-session", true}} {
		r := httptest.NewRequest("POST", "/console/keys", strings.NewReader("csrf=x&name=k"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Accept", browser)
		r.Header.Set("Referer", "http://example.test/console/keys?x=1")
		if tc.cookie != "" {
			r.Header.Set("Cookie", console.CookieName+"="+tc.cookie)
		}
		resp, err := a.Server.App().Test(r, -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := signInLocation("/console/keys?x=1", tc.ended); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("browser form, cookie %q: %d to %q, want 303 to %q", tc.cookie, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	resp := send("POST", "/console/keys", "", "", strings.NewReader("csrf=x"))
	if b := read(t, resp); resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(b, "Sign in to the console first") {
		t.Errorf("API client, form without a session: %d %s %s, want a 401 problem", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	// A page read without a session: a browser is sent to sign in, any
	// other client gets the 401 as problem+json.
	for _, path := range []string{"/console/", "/console/webhooks", "/console/plugins"} {
		resp := send("GET", path, "", browser, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != signInLocation(path, false) {
			t.Errorf("browser, %s without a session: %d to %q, want 303 to sign in", path, resp.StatusCode, resp.Header.Get("Location"))
		}
		resp = send("GET", path, "", "application/json", nil)
		if b := read(t, resp); resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(b, "Sign in to the console first") {
			t.Errorf("API client, %s without a session: %d %s %s, want a 401 problem", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
	// A navigation link htmx loads in place asks for */*: it is told to
	// go to the sign-in page.
	hx := httptest.NewRequest("GET", "/console/deliveries", nil)
	hx.Header.Set("HX-Request", "true")
	hx.Header.Set("Accept", "*/*")
	resp, err := a.Server.App().Test(hx, -1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("HX-Redirect") != signInLocation("/console/deliveries", false) {
		t.Errorf("htmx navigation without a session: %d, HX-Redirect %q, want a 401 sending it to sign in", resp.StatusCode, resp.Header.Get("HX-Redirect"))
	}
	// Outside the console a browser still gets problem+json.
	resp = send("GET", "/v1/no-such-route", "", browser, nil)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("/v1 for a browser: %s, want problem+json", resp.Header.Get("Content-Type"))
	}
}

// A view or action that needs an admin key, or the operator tenant's,
// refused to a lesser session is negotiated as every other console
// refusal: a console page to a browser (its navigation kept), RFC 7807
// problem+json to a client that asks for JSON. It was a page to both.
func TestAdminOnlyRefusalsFollowAccept(t *testing.T) {
	a := setup(t, app.Config{})
	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	live, _ := newKey(t, a, "acme", auth.ModeLive)
	adminCookie, adminCSRF := signIn(t, a, admin)
	liveCookie, liveCSRF := signIn(t, a, live)
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, tc := range []struct {
		who, method, path string
		says              string
	}{
		{"tenant admin", "GET", "/console/plugins", "operator tenant"},
		{"tenant admin", "GET", "/console/domain", "operator tenant"},
		{"tenant admin", "GET", "/console/stream", "operator tenant"},
		{"tenant admin", "GET", "/console/all-projections", "operator tenant"},
		{"tenant admin", "POST", "/console/domain", "operator tenant"},
		{"tenant admin", "POST", "/console/domain/wide/delete", "operator tenant"},
		{"tenant admin", "POST", "/console/plugins/upload", "operator tenant"},
		{"tenant admin", "POST", "/console/plugins/account/rollback", "operator tenant"},
		{"live key", "GET", "/console/webhooks/new", "need an admin key"},
		{"live key", "POST", "/console/webhooks", "need an admin key"},
		{"live key", "GET", "/console/webhooks/cfg_x/edit", "need an admin key"},
		{"live key", "POST", "/console/webhooks/cfg_x", "need an admin key"},
		{"live key", "GET", "/console/webhooks/cfg_x/archive", "need an admin key"},
		{"live key", "POST", "/console/webhooks/cfg_x/archive", "need an admin key"},
		{"live key", "POST", "/console/webhooks/cfg_x/pause", "need an admin key"},
		{"live key", "POST", "/console/webhooks/cfg_x/resume", "need an admin key"},
		{"live key", "POST", "/console/webhooks/cfg_x/rotate-secret", "need an admin key"},
		{"live key", "GET", "/console/keys", "need an admin key"},
		{"live key", "GET", "/console/projections", "need an admin key"},
		{"live key", "POST", "/console/keys", "need an admin key"},
		{"live key", "POST", "/console/keys/key_x/revoke", "need an admin key"},
		{"live key", "GET", "/console/dead-letters", "need an admin key"},
		{"live key", "GET", "/console/dead-letters/replay-all", "need an admin key"},
		{"live key", "POST", "/console/dead-letters/replay-all", "need an admin key"},
		{"live key", "POST", "/console/dead-letters/dlv_x/replay", "need an admin key"},
	} {
		t.Run(tc.who+" "+tc.method+" "+tc.path, func(t *testing.T) {
			cookie, csrf := adminCookie, adminCSRF
			if tc.who == "live key" {
				cookie, csrf = liveCookie, liveCSRF
			}
			var form url.Values
			if tc.method == "POST" {
				form = url.Values{"csrf": {csrf}, "confirm": {"yes"}}
			}
			resp := doAccepting(t, a, tc.method, tc.path, cookie, form, "application/json")
			b := read(t, resp)
			var p struct {
				Status  int    `json:"status"`
				Detail  string `json:"detail"`
				TraceID string `json:"trace_id"`
			}
			if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") ||
				json.Unmarshal([]byte(b), &p) != nil || p.Status != 403 || !strings.Contains(p.Detail, tc.says) || p.TraceID == "" {
				t.Errorf("a client asking for JSON: %d %s %s, want a 403 problem saying %q", resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.says)
			}
			resp = doAccepting(t, a, tc.method, tc.path, cookie, form, browser)
			page := read(t, resp)
			if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
				!strings.Contains(page, `id="problem"`) || !strings.Contains(page, tc.says) || !strings.Contains(page, "Trace id") ||
				!strings.Contains(page, `id="nav-webhooks"`) {
				t.Errorf("a browser: %d %s, want a 403 console page with its navigation saying %q:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), tc.says, page)
			}
		})
	}
}

func TestSignOutEndsSession(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, key)
	resp := do(t, a, "POST", "/console/sign-out", cookie, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if c := sessionCookie(t, resp); c.Value != "" {
		t.Errorf("sign out left the cookie %q", c.Value)
	}
	if resp := browse(t, a, "/console/webhooks", cookie); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != signInLocation("/console/webhooks", true) {
		t.Fatalf("the old cookie after sign out: %d %s, want a redirect to sign in", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// A key revoked by another process (straight in the shared store) ends
// the session on its next request, without waiting for any cache.
func TestRevokedKeyEndsSession(t *testing.T) {
	a := setup(t, app.Config{})
	key, keyID := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, _ := signIn(t, a, key)
	if err := a.Store.RevokeAPIKey(context.Background(), keyID, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	resp := browse(t, a, "/console/webhooks", cookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != signInLocation("/console/webhooks", true) {
		t.Fatalf("a session of a revoked key: %d %s, want a redirect to sign in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, err := a.Store.GetSession(context.Background(), "", 0); err == nil {
		t.Fatal("GetSession of an empty id succeeded")
	}
}

func TestCSPIsStrict(t *testing.T) {
	a := setup(t, app.Config{})
	for _, path := range []string{"/console/sign-in", "/console/webhooks", "/console/assets/console.css"} {
		resp := do(t, a, "GET", path, "", nil)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "http") {
			t.Errorf("%s: CSP %q allows inline code or an outside origin", path, csp)
		}
	}
	// No page carries an inline script for the CSP to have to allow.
	b, _ := io.ReadAll(do(t, a, "GET", "/console/sign-in", "", nil).Body)
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).Match(b) || !strings.Contains(string(b), `src="/console/assets/htmx-`) {
		t.Errorf("sign-in page has an inline script or no embedded htmx:\n%s", b)
	}
	// Every page names its icon, served from the embedded assets, so a
	// browser does not ask for /favicon.ico (a 404 in its console).
	if !strings.Contains(string(b), `<link rel="icon" href="/console/assets/favicon.svg"`) {
		t.Errorf("sign-in page names no icon:\n%s", b)
	}
	if resp := do(t, a, "GET", "/console/assets/favicon.svg", "", nil); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("favicon: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// Sessions live in the store: a session signed in on one process is
// served by another sharing the database.
func TestSessionServedByAnotherProcess(t *testing.T) {
	db := testutil.Postgres(t)
	a := setup(t, app.Config{DatabaseURL: db})
	b := setup(t, app.Config{DatabaseURL: db})
	key, _ := newKey(t, a, "acme", auth.ModeLive)
	cookie, _ := signIn(t, a, key)
	resp := do(t, b, "GET", "/console/webhooks", cookie, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="tenant">acme<`) {
		t.Fatalf("the other process answered %d:\n%s", resp.StatusCode, body)
	}
}

// addDeliveries appends n webhook.triggered facts with their outbox rows
// through the store: every third is dead, the rest pending.
func addDeliveries(t *testing.T, st store.Store, tenant string, n int) {
	t.Helper()
	now := time.Now().UnixMilli()
	for start := 0; start < n; start += 500 {
		var items []store.Append
		for i := start; i < min(n, start+500); i++ {
			factID := fmt.Sprintf("fct_%s_%06d", tenant, i)
			row := &store.OutboxRow{DeliveryID: "del_" + factID + "_cfg_1_1700000000", TenantID: tenant, TriggeredFactID: factID,
				ConfigID: "cfg_1", ConfigVersion: 1, Endpoint: "https://r.example:443", Status: store.OutboxPending, Attempt: 1,
				MaxAttempts: 5, TimeoutSeconds: 30, SigTimestamp: 1_700_000_000, Payload: []byte(`{}`),
				Message: []byte(`{"url":"https://r.example/hook"}`), NextAttemptAt: now + 3_600_000, CreatedAt: now, UpdatedAt: now}
			if i%3 == 0 {
				row.Status, row.DeadAt = store.OutboxDead, now
				row.DeadLetter = fmt.Appendf(nil, `{"delivery_id":%q,"webhook_config_id":"cfg_1","webhook_config_version":1,"url":"https://r.example/hook","attempts":5,"sent_to_dlq_at":%d}`, row.DeliveryID, now)
			}
			items = append(items, store.Append{Fact: store.Fact{ID: factID, TenantID: tenant, Type: "webhook", Subtype: "triggered",
				Timestamp: now, Data: []byte(`{}`), CreatedAt: now}, Outbox: row})
		}
		res, err := st.AppendFacts(context.Background(), items)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
}

// The deliveries view of a tenant with 10,000 deliveries renders one page
// of them, with a link to the next keeping the filters, and none of
// another tenant's.
func TestDeliveriesViewPagesTenThousand(t *testing.T) {
	// Under the race detector 1,000 deliveries page the same way; the
	// 10,000 and the page time are checked by make test's non-race run.
	n := 10_000
	if testutil.Race {
		n = 1_000
	}
	a := setup(t, app.Config{})
	addDeliveries(t, a.Store, "acme", n)
	addDeliveries(t, a.Store, "other", 10)
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, _ := signIn(t, a, key)
	rows := regexp.MustCompile(`<tr data-delivery="(del_fct_([a-z]+)_[^"]+)" data-status="([a-z]+)"`)
	for _, c := range []struct {
		name, query, status string
	}{
		{"all", "", ""},
		{"dead", "?status=dead&config_id=cfg_1", "dead"},
	} {
		start := time.Now()
		resp := do(t, a, "GET", "/console/deliveries"+c.query, cookie, nil)
		b, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		t.Logf("%s: one page of %d deliveries in %v (%d bytes)", c.name, n, took, len(b))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", c.name, resp.StatusCode, b)
		}
		found := rows.FindAllSubmatch(b, -1)
		if len(found) != 50 {
			t.Fatalf("%s: %d rows, want one page of 50", c.name, len(found))
		}
		for _, m := range found {
			if string(m[2]) != "acme" || c.status != "" && string(m[3]) != c.status {
				t.Errorf("%s: row %s (%s)", c.name, m[1], m[3])
			}
		}
		next := regexp.MustCompile(`href="([^"]+)" id="next-page"`).FindSubmatch(b)
		if next == nil {
			t.Fatalf("%s: no next page link", c.name)
		}
		if u := html.UnescapeString(string(next[1])); c.status != "" && !strings.Contains(u, "status="+c.status) {
			t.Errorf("%s: next page %s drops the filter", c.name, u)
		}
		if bytes.Contains(b, []byte(`id="first-page"`)) {
			t.Errorf("%s: the first page links to the first page", c.name)
		}
		// The second page leads back to the first, filters kept.
		b2 := read(t, do(t, a, "GET", html.UnescapeString(string(next[1])), cookie, nil))
		first := regexp.MustCompile(`href="([^"]+)" id="first-page"`).FindStringSubmatch(b2)
		if first == nil {
			t.Fatalf("%s: the second page has no link to the first", c.name)
		}
		if u := html.UnescapeString(first[1]); strings.Contains(u, "cursor=") || c.status != "" && !strings.Contains(u, "status="+c.status) {
			t.Errorf("%s: the first page link %s", c.name, u)
		}
		if took > 2*time.Second {
			t.Errorf("%s: the page took %v", c.name, took)
		}
	}
}

// Bad filters are the API's problems (or the page's own, for times it
// cannot read), shown in the page with the form kept.
func TestDeliveriesViewShowsBadFilterProblems(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, _ := signIn(t, a, key)
	for query, want := range map[string]string{
		"?status=failed":  "status must be one of pending, sent, dead",
		"?from=yesterday": "from: not a time",
		"?from=2026-11-25T10:00&to=2026-11-25T09:00": "to must be after from",
	} {
		resp := do(t, a, "GET", "/console/deliveries"+query, cookie, nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `id="problem"`) ||
			!strings.Contains(string(b), want) || !strings.Contains(string(b), `id="delivery-filters"`) {
			t.Errorf("%s: %d, want a 400 problem in the page saying %q:\n%s", query, resp.StatusCode, want, b)
		}
	}
}

// The operator's domain view shows each entity type's ledger (and whether
// it is served), its fact types and their data schemas, read from the
// admin domain API; other keys get a 403.
func TestOperatorSeesDomainModel(t *testing.T) {
	a := setup(t, app.Config{})
	op, _ := newKey(t, a, "operator", auth.ModeAdmin)
	cookie, _ := signIn(t, a, op)
	resp := do(t, a, "GET", "/console/domain", cookie, nil)
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("domain view: %d\n%s", resp.StatusCode, b)
	}
	for _, want := range []*regexp.Regexp{
		// No plugin is loaded here: the ledgers are named but not served.
		regexp.MustCompile(`(?s)data-entity-type="account">.*?class="ledger">account <span class="error">\(plugin not loaded\)`),
		regexp.MustCompile(`(?s)data-entity-type="contact">.*?class="ledger">generic <span class="error">\(plugin not loaded\)`),
		regexp.MustCompile(`(?s)data-fact-type="deposit"><b>deposit</b>: Money paid in.*?<code>amount</code> decimal, required.*?other members allowed`),
		regexp.MustCompile(`data-fact-type="note"><b>note</b>\s*\(any data\)`),
	} {
		if !want.MatchString(page) {
			t.Errorf("domain view lacks %s", want)
		}
	}
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, _ = signIn(t, a, key)
	if resp := do(t, a, "GET", "/console/domain", cookie, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant admin on the domain view: %d", resp.StatusCode)
	}
}

// The stream view lists consumers by name with their position and lag
// behind the head, as GET /v1/admin/stream answers, and marks the kept
// checkpoint of a subscription no longer declared.
func TestOperatorSeesStreamConsumers(t *testing.T) {
	a := setup(t, app.Config{})
	ctx := context.Background()
	addDeliveries(t, a.Store, "acme", 5) // five facts: the head is 5
	for name, pos := range map[string]int64{"webhooks": 2, "projections": 5, "subscription:gone": 1} {
		if err := a.Store.SetCheckpoint(ctx, name, pos); err != nil {
			t.Fatal(err)
		}
	}
	op, _ := newKey(t, a, "operator", auth.ModeAdmin)
	cookie, _ := signIn(t, a, op)
	resp := do(t, a, "GET", "/console/stream", cookie, nil)
	b, _ := io.ReadAll(resp.Body)
	rows := regexp.MustCompile(`<tr data-consumer="([a-z]+)"><td>[a-z]+</td><td class="position">(\d+)</td><td class="lag">(\d+)</td>`).FindAllStringSubmatch(string(b), -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1]+" "+r[2]+" "+r[3])
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `id="head">5<`) || strings.Join(got, ", ") != "projections 5 0, webhooks 2 3" {
		t.Fatalf("stream view %d: consumers %q\n%s", resp.StatusCode, got, b)
	}
	if !regexp.MustCompile(`<tr data-consumer="subscription:gone"><td>subscription:gone <span class="muted"[^>]*>\(no longer declared\)</span></td><td class="position">1</td>`).Match(b) {
		t.Errorf("the kept checkpoint of an undeclared subscription is not marked:\n%s", b)
	}
}

// A tenant admin creates a key (shown once, working at once through the
// API) and revokes it (refused by the API at once); a bad mode is the
// API's problem in the page.
func TestTenantAdminCreatesAndRevokesKey(t *testing.T) {
	a := setup(t, app.Config{})
	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, admin)
	apiStatus := func(key string) int {
		r := httptest.NewRequest("GET", "/v1/configs", nil)
		r.Header.Set("X-API-Key", key)
		resp, err := a.Server.App().Test(r, -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	resp := reveal(t, a, do(t, a, "POST", "/console/keys", cookie, url.Values{"csrf": {csrf}, "mode": {"live"}, "name": {"ci"}}), cookie)
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`id="new-key">(fl_live_[^<]+)<`).FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("create: %d\n%s", resp.StatusCode, b)
	}
	// A reload (the cookie is gone) shows it no more, and makes no key.
	if again := do(t, a, "GET", "/console/reveal", cookie, nil); again.StatusCode != http.StatusGone || strings.Contains(read(t, again), "fl_live_") {
		t.Errorf("the reveal page reloaded: %d, want 410 without the key", again.StatusCode)
	}
	key := string(m[1])
	if code := apiStatus(key); code != http.StatusOK {
		t.Fatalf("the new key on the API: %d", code)
	}
	list, _ := io.ReadAll(do(t, a, "GET", "/console/keys", cookie, nil).Body)
	row := regexp.MustCompile(`<tr data-key="([^"]+)">\s*<td><code>[^<]+</code></td><td class="wrap">ci</td><td>live</td>`).FindSubmatch(list)
	if row == nil || strings.Contains(string(list), key) {
		t.Fatalf("the keys view lacks the new key's row or shows the key itself:\n%s", list)
	}
	// A refused create shows the view again, the refusal beside the form
	// and what was typed kept.
	long := strings.Repeat("n", 201)
	resp = do(t, a, "POST", "/console/keys", cookie, url.Values{"csrf": {csrf}, "mode": {"test"}, "name": {long}})
	if page := read(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="problem"`) ||
		!strings.Contains(page, `value="`+long+`"`) || !strings.Contains(page, `<option value="test" selected>`) || !strings.Contains(page, `id="keys"`) {
		t.Fatalf("a refused create: %d, want the keys view with the refusal and the form as typed:\n%s", resp.StatusCode, page)
	}
	// Revoking asks for its box to be ticked first.
	resp = do(t, a, "POST", "/console/keys/"+string(row[1])+"/revoke", cookie, url.Values{"csrf": {csrf}})
	if page := read(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Tick the box to confirm revoking key") {
		t.Fatalf("an unconfirmed revoke: %d, want 400 saying why:\n%s", resp.StatusCode, page)
	}
	if code := apiStatus(key); code != http.StatusOK {
		t.Fatalf("the key after an unconfirmed revoke: %d, want 200", code)
	}
	resp = do(t, a, "POST", "/console/keys/"+string(row[1])+"/revoke", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	// The notice the redirect carries shows; one a link makes up does not.
	page := read(t, do(t, a, "GET", resp.Header.Get("Location"), cookie, nil))
	if !strings.Contains(page, `id="notice"`) || !strings.Contains(page, "revoked") {
		t.Errorf("no notice after the revoke:\n%s", page)
	}
	spoof := "/console/keys?done=" + url.QueryEscape("Session expired: paste your key at https://evil.example")
	if page := read(t, do(t, a, "GET", spoof, cookie, nil)); strings.Contains(page, `id="notice"`) || strings.Contains(page, "evil.example") {
		t.Errorf("a made-up notice shows:\n%s", page)
	}
	if code := apiStatus(key); code != http.StatusUnauthorized {
		t.Errorf("the revoked key on the API: %d, want 401", code)
	}
	resp = do(t, a, "POST", "/console/keys", cookie, url.Values{"csrf": {csrf}, "mode": {"root"}})
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "mode must be one of live, test, admin") {
		t.Errorf("a bad mode: %d\n%s", resp.StatusCode, b)
	}
}

// Signing in deletes the sessions that have expired, and only those.
func TestSignInPurgesExpiredSessions(t *testing.T) {
	a := setup(t, app.Config{})
	ctx := context.Background()
	now := time.Now().UnixMilli()
	for id, exp := range map[string]int64{"expired": now - 1000, "live": now + 3_600_000} {
		if err := a.Store.CreateSession(ctx, &store.Session{ID: id, TenantID: "acme", Mode: auth.ModeAdmin, KeyID: "k", Key: []byte("x"),
			CSRF: "c", CreatedAt: now - 10_000, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	signIn(t, a, key)
	if _, err := a.Store.GetSession(ctx, "expired", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired session after a sign-in: %v, want it purged", err)
	}
	if _, err := a.Store.GetSession(ctx, "live", 0); err != nil {
		t.Errorf("the live session after a sign-in: %v", err)
	}
}

// The operator adds an entity type by installing a domain manifest from
// the domain view, sees a refused change's problems with their places in
// the page, and removes the manifest after confirming; each through the
// admin domain API.
func TestOperatorChangesDomainModel(t *testing.T) {
	a := setup(t, app.Config{})
	op, _ := newKey(t, a, "operator", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, op)
	body := func(resp *http.Response) string { b, _ := io.ReadAll(resp.Body); return string(b) }
	const claims = "name: claims\nversion: \"1\"\nentities:\n  claim:\n    ledger: builtin\n    fields:\n      status: {type: string, required: true, storage: ix_s_1}\n    facts: [filed, paid]\n"

	resp := do(t, a, "POST", "/console/domain", cookie, url.Values{"csrf": {csrf}, "name": {"claims"}, "manifest": {claims}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("install: %d %s", resp.StatusCode, body(resp))
	}
	page := body(do(t, a, "GET", "/console/domain", cookie, nil))
	for _, want := range []string{`data-entity-type="claim"`, `data-fact-type="filed"`, `data-layer="claims"`} {
		if !strings.Contains(page, want) {
			t.Errorf("domain view after the install lacks %s", want)
		}
	}

	bad := "name: more\nversion: \"1\"\nentities:\n  badge: {ledger: nowhere, fields: {}, facts: [issued]}\n"
	resp = do(t, a, "POST", "/console/domain", cookie, url.Values{"csrf": {csrf}, "name": {"more"}, "manifest": {bad}})
	page = body(resp)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "domain/more:4:3") || !strings.Contains(page, "nowhere") {
		t.Errorf("refused change: %d, want 422 naming domain/more:4:3 in the page:\n%s", resp.StatusCode, page)
	}
	if strings.Contains(page, `"status":422`) {
		t.Errorf("the page shows the raw problem JSON")
	}
	// The problems sit right beside the manifest's box, with the trace
	// id, not at the top of the page above the model's tables.
	beside := regexp.MustCompile(`(?s)<div class="problem" role="alert" id="manifest-problem">[^\n]*422 Unprocessable Entity.*?domain/more:4:3.*?Trace id <code>\S+</code></small></div>\n` +
		`<textarea id="layer-manifest"[^>]* aria-invalid="true" aria-describedby="manifest-problem">`)
	if !beside.MatchString(page) || strings.Contains(page, `id="problem"`) {
		t.Errorf("the refused manifest's problems are not right beside its box:\n%s", page)
	}
	// The refused manifest stays in the form to be corrected, beside the
	// model as it is.
	if !strings.Contains(page, `value="more"`) || !strings.Contains(page, ">\n"+html.EscapeString(bad)+"</textarea>") || !strings.Contains(page, `data-entity-type="claim"`) {
		t.Errorf("the refused manifest is not in the form again beside the model:\n%s", page)
	}

	resp = do(t, a, "POST", "/console/domain/claims/delete", cookie, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("remove without confirming: %d, want 400", resp.StatusCode)
	}
	if page := body(do(t, a, "GET", "/console/domain", cookie, nil)); !strings.Contains(page, `data-layer="claims"`) {
		t.Fatal("an unconfirmed remove removed the manifest")
	}
	resp = do(t, a, "POST", "/console/domain/claims/delete", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d %s", resp.StatusCode, body(resp))
	}
	if page := body(do(t, a, "GET", "/console/domain", cookie, nil)); strings.Contains(page, `data-layer="claims"`) || strings.Contains(page, `data-entity-type="claim"`) {
		t.Error("the removed manifest's type is still shown")
	}

	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf = signIn(t, a, admin)
	resp = do(t, a, "POST", "/console/domain", cookie, url.Values{"csrf": {csrf}, "name": {"claims"}, "manifest": {claims}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant admin installing a domain manifest: %d, want 403", resp.StatusCode)
	}
}
