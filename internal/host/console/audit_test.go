package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/testutil"
)

// Rotating a secret 100 configs share shows the new secret once: the
// reveal cookie stays small whatever the number of configs (a list of
// them made it 6 KB at 65 configs, which Chromium drops and the
// listener refuses, and the new secret was lost), and the page still
// names the configs left on the previous secret.
func TestRotatingASecretSharedByManyConfigsRevealsIt(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	ref := apiDo(t, a, key, "POST", "/v1/admin/webhooks/secrets", nil)["secret_ref"].(string)
	var ids []string
	for i := range 100 {
		cfg := apiDo(t, a, key, "POST", "/v1/configs", map[string]any{"type": "webhook", "name": fmt.Sprintf("shared %d", i),
			"settings": map[string]any{"url": "https://hooks.example.com/shared", "secret_ref": ref, "triggers": []string{"note.shared"}}})
		ids = append(ids, cfg["id"].(string))
	}
	cookie, csrf := signIn(t, a, key)
	resp := do(t, a, "POST", "/console/webhooks/"+ids[0]+"/rotate-secret", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	for _, c := range resp.Cookies() {
		if c.Path == "/console/reveal" && len(c.Name)+len(c.Value) > 1024 {
			t.Errorf("the reveal cookie is %d bytes, want well under the 4,096 browsers keep", len(c.Name)+len(c.Value))
		}
	}
	page := reveal(t, a, resp, cookie)
	html := read(t, page)
	m := regexp.MustCompile(`id="secret">(whsec_[^<]+)<`).FindStringSubmatch(html)
	if page.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("the reveal page: %d, want the new secret:\n%.2000s", page.StatusCode, html)
	}
	if !strings.Contains(html, `<span id="used-by-count">99</span> other configs still use it`) {
		t.Errorf("the page does not say 99 other configs still use the previous secret:\n%.3000s", html)
	}
	for _, id := range ids[1:] {
		if !strings.Contains(html, "<code>"+id+"</code>") {
			t.Errorf("the page does not name %s, still on the previous secret", id)
		}
	}
	if strings.Contains(html, "<code>"+ids[0]+"</code>") {
		t.Errorf("the page lists the rotated config %s as still on the previous secret", ids[0])
	}
	// Shown once: the cookie is cleared, and without it the page is gone.
	again := do(t, a, "GET", "/console/reveal", cookie, nil)
	if again.StatusCode != http.StatusGone || strings.Contains(read(t, again), m[1]) {
		t.Errorf("the reveal page again: %d, want 410 without the secret", again.StatusCode)
	}
}

// signInLocation is where a page read without a session is sent: the
// sign-in page, leading back to path, saying when a session ended.
func signInLocation(path string, ended bool) string {
	q := url.Values{}
	if path != "/console/" {
		q.Set("next", path)
	}
	if ended {
		q.Set("ended", "1")
	}
	if len(q) == 0 {
		return "/console/sign-in"
	}
	return "/console/sign-in?" + q.Encode()
}

// signInFrom posts the sign-in form with the given request headers.
func signInFrom(t *testing.T, a *app.App, form url.Values, headers map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest("POST", "/console/sign-in", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	resp, err := a.Server.App().Test(r, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// A sign-in form another site posts (login CSRF: the victim's browser
// signed into the attacker's tenant) is refused; the console's own form,
// and a client that sends no Origin or Sec-Fetch-Site (curl), sign in.
func TestSignInFromAnotherSiteIsRefused(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "attacker", auth.ModeAdmin)
	form := url.Values{"key": {key}}
	const html = "text/html,application/xhtml+xml,*/*;q=0.8"
	for name, h := range map[string]map[string]string{
		"another origin":            {"Origin": "http://evil.example", "Accept": html},
		"another origin, no accept": {"Origin": "https://evil.example:8443"},
		"an opaque origin":          {"Origin": "null", "Accept": html},
		"cross-site fetch":          {"Sec-Fetch-Site": "cross-site", "Accept": html},
		"same-site fetch":           {"Sec-Fetch-Site": "same-site", "Accept": html},
		"cross-site with its host":  {"Sec-Fetch-Site": "cross-site", "Origin": "http://example.com", "Accept": html},
	} {
		resp := signInFrom(t, a, form, h)
		page := read(t, resp)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("%s: %d, cookies %v, want a 403 and no session", name, resp.StatusCode, resp.Cookies())
		}
		if h["Accept"] == html && (!strings.Contains(page, `id="problem"`) || !strings.Contains(page, "another site")) {
			t.Errorf("%s: a browser gets no console page saying why:\n%s", name, page)
		}
	}
	for name, h := range map[string]map[string]string{
		"the console's own page":         {"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin", "Accept": html},
		"same origin, no fetch metadata": {"Origin": "http://example.com"},
		"typed in the address bar":       {"Sec-Fetch-Site": "none"},
		"curl":                           {},
	} {
		resp := signInFrom(t, a, form, h)
		if resp.StatusCode != http.StatusSeeOther || sessionCookie(t, resp).Value == "" {
			t.Errorf("%s: %d, want a session", name, resp.StatusCode)
		}
	}
}

// A deep link opened without a session comes back after the sign-in; the
// way back accepts only console paths of this origin. A session that
// ended (its key revoked) says so on the sign-in page.
func TestSignInLeadsBackToTheDeepLink(t *testing.T) {
	a := setup(t, app.Config{})
	key, keyID := newKey(t, a, "acme", auth.ModeAdmin)
	const deep = "/console/deliveries/dlv_01?tab=attempts"
	resp := browse(t, a, deep, "")
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || loc != signInLocation(deep, false) {
		t.Fatalf("a deep link without a session: %d to %q, want the sign-in page leading back", resp.StatusCode, loc)
	}
	page := read(t, browse(t, a, loc, ""))
	if !strings.Contains(page, `<input type="hidden" name="next" value="/console/deliveries/dlv_01?tab=attempts">`) ||
		strings.Contains(page, `id="session-ended"`) {
		t.Fatalf("the sign-in page does not carry the way back:\n%s", page)
	}
	resp = signInFrom(t, a, url.Values{"key": {key}, "next": {deep}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != deep {
		t.Errorf("sign-in with next: %d to %q, want %q", resp.StatusCode, resp.Header.Get("Location"), deep)
	}
	// A key refused keeps the way back in the form.
	resp = signInFrom(t, a, url.Values{"key": {"fl_live_nope"}, "next": {deep}}, map[string]string{"Accept": "text/html"})
	if page := read(t, resp); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `name="next" value="/console/deliveries/dlv_01?tab=attempts"`) {
		t.Errorf("a refused key loses the way back: %d\n%s", resp.StatusCode, page)
	}
	// Anywhere else is the console's home: no open redirect.
	for _, next := range []string{"https://evil.example/console/", "//evil.example/console/", "/\\evil.example/console/",
		"/console//evil.example", "/console/../v1/facts", "/consolex", "/v1/facts", "javascript:alert(1)", "/console/\x00x",
		"http:/console/plugins", "/console/sign-in"} {
		resp := signInFrom(t, a, url.Values{"key": {key}, "next": {next}}, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" {
			t.Errorf("sign-in with next %q: %d to %q, want the console's home", next, resp.StatusCode, resp.Header.Get("Location"))
		}
		if page := read(t, browse(t, a, "/console/sign-in?next="+url.QueryEscape(next), "")); strings.Contains(page, `name="next"`) {
			t.Errorf("the sign-in page carries next %q", next)
		}
	}
	// A revoked key's session sends the browser to sign in, saying it ended.
	cookie, _ := signIn(t, a, key)
	if err := a.Store.RevokeAPIKey(context.Background(), keyID, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	resp = browse(t, a, "/console/keys", cookie)
	if loc := resp.Header.Get("Location"); loc != signInLocation("/console/keys", true) {
		t.Fatalf("a revoked session: to %q", loc)
	}
	if page := read(t, browse(t, a, signInLocation("/console/keys", true), "")); !strings.Contains(page, `id="session-ended"`) {
		t.Errorf("the sign-in page after a session ended does not say so:\n%s", page)
	}
}

// chartedProjection makes a projection of calls by channel (materialized
// or not) and one call whose channel is channel; it returns its id.
func chartedProjection(t *testing.T, a *app.App, key string, materialize bool, channel string) string {
	t.Helper()
	cfg := apiDo(t, a, key, "POST", "/v1/configs", map[string]any{"type": "projection", "name": "calls", "settings": map[string]any{
		"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour", "groupBy": []string{"data.channel", "data.kind"},
		"aggregations": []map[string]any{{"field": "count", "function": "count"}}, "materialize": materialize, "storageVersion": 2}})["id"].(string)
	apiDo(t, a, key, "POST", "/v1/entities", map[string]any{"type": "contact", "id": "c1", "status": "active", "name": "c"})
	apiDo(t, a, key, "POST", "/v1/facts", map[string]any{"entity_id": "c1", "type": "call",
		"timestamp": time.Date(2024, 1, 15, 10, 5, 0, 0, time.UTC).UnixMilli(), "data": map[string]any{"channel": channel, "kind": "in"}})
	return cfg
}

// With the cached state down (Redis unreachable) the chart is computed
// from the facts and says so; the API's advice to pass filters.mode
// compute, a choice the console does not offer, is not shown.
func TestProjectionViewComputesWhenTheCachedStateIsDown(t *testing.T) {
	redis := testutil.Redis(t)
	host := strings.TrimPrefix(redis, "redis://")
	host = host[:strings.IndexByte(host, '/')]
	px := testutil.NewProxy(t, host)
	a := setup(t, app.Config{Addr: "127.0.0.1:0", RedisURL: strings.Replace(redis, host, px.Addr(), 1), RateLimitFailOpen: true})
	serve(t, a) // projections run with the app
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cfg := chartedProjection(t, a, key, true, "phone")
	testutil.Eventually(t, time.Minute, "the projection ready", func() bool {
		d := apiDo(t, a, key, "POST", "/v1/projections/"+cfg+"/query", map[string]any{"filters": map[string]any{"from": "2024-01-15T09:00", "to": "2024-01-15T11:00"}})
		rows, _ := d["results"].([]any)
		return len(rows) == 1 && d["_meta"].(map[string]any)["ready"] == true
	})
	px.SetDown(true)
	cookie, _ := signIn(t, a, key)
	resp := browse(t, a, "/console/projections?id="+cfg+"&from=2024-01-15T09:00&to=2024-01-15T11:00", cookie)
	page := read(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="computed"`) || !strings.Contains(page, "cached state cannot be read") ||
		!strings.Contains(page, `data-bucket="2024-01-15T10"`) || strings.Contains(page, "filters.mode") {
		t.Fatalf("the projection chart with Redis down: %d, want the numbers computed from the facts, said so:\n%s", resp.StatusCode, page)
	}
}

// A group value is isolated in the chart's table: a right-to-left
// override in it reordered the rest of the label. (The chart's legend
// is checked in TestBrowserGroupValuesAreIsolated.) A projection that
// keeps no cached state is charted from the facts.
func TestGroupValuesAreIsolatedInTheChartTable(t *testing.T) {
	a := setup(t, app.Config{Addr: "127.0.0.1:0"})
	serve(t, a)
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cfg := chartedProjection(t, a, key, false, "abc\u202edef")
	cookie, _ := signIn(t, a, key)
	resp := browse(t, a, "/console/projections?id="+cfg+"&from=2024-01-15T09:00&to=2024-01-15T11:00", cookie)
	page := read(t, resp)
	want := "<bdi>data.channel</bdi>: <bdi>abc\u202edef</bdi>, <bdi>data.kind</bdi>: <bdi>in</bdi>"
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, want) || !strings.Contains(page, `id="computed"`) {
		t.Fatalf("the chart table: %d, want the group as %q:\n%s", resp.StatusCode, want, page)
	}
}

// Rolling a plugin back is confirmed first, as revoking a key is: the
// form without its box ticked is refused and nothing is done.
func TestPluginRollbackNeedsConfirmation(t *testing.T) {
	a := setup(t, app.Config{})
	op, _ := newKey(t, a, "operator", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, op)
	resp := doAccepting(t, a, "POST", "/console/plugins/ledger/rollback", cookie, url.Values{"csrf": {csrf}}, "text/html")
	if page := read(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Tick the box to confirm rolling plugin ledger back") {
		t.Errorf("an unconfirmed roll back: %d, want 400 asking for the box:\n%s", resp.StatusCode, page)
	}
}
