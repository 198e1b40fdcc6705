package console_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
)

// api calls the gateway in-process with a key and returns the envelope's
// data.
func api(t *testing.T, a *app.App, key, method, path string) map[string]any {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	r.Header.Set("X-API-Key", key)
	resp, err := a.Server.App().Test(r, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data map[string]any `json:"data"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 || json.Unmarshal(b, &env) != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return env.Data
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// webhookRow returns the webhooks page's row of a config.
func webhookRow(t *testing.T, a *app.App, cookie, id string) string {
	t.Helper()
	resp := do(t, a, "GET", "/console/webhooks", cookie, nil)
	page := body(t, resp)
	m := regexp.MustCompile(`(?s)<tr data-config="` + regexp.QuoteMeta(id) + `">.*?</tr>`).FindString(page)
	if resp.StatusCode != http.StatusOK || m == "" {
		t.Fatalf("webhooks page (%d) has no row for %s:\n%s", resp.StatusCode, id, page)
	}
	return m
}

// A tenant admin creates a webhook with a new secret, edits it into
// version 2, pauses, resumes and archives it, each through the API with
// the session's key.
func TestTenantAdminManagesWebhookConfigs(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, key)

	resp := do(t, a, "GET", "/console/webhooks", cookie, nil)
	if page := body(t, resp); !strings.Contains(page, `href="/console/webhooks/new"`) {
		t.Fatalf("no New webhook link:\n%s", page)
	}
	resp = do(t, a, "GET", "/console/webhooks/new", cookie, nil)
	form := body(t, resp)
	for _, want := range []string{`name="csrf" value="` + csrf + `"`, `<label for="url">`, `<label for="triggers">`, `<label for="secret_ref">`,
		`<label for="max_attempts">`, `<label for="timeout_seconds">`, `id="save-webhook"`, `<title>Factline console: New webhook</title>`} {
		if !strings.Contains(form, want) {
			t.Errorf("new webhook form lacks %s", want)
		}
	}

	// Without the CSRF token nothing is created.
	resp = do(t, a, "POST", "/console/webhooks", cookie, url.Values{"name": {"x"}, "url": {"https://hooks.example.com/x"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("create without CSRF token: %d", resp.StatusCode)
	}

	resp = reveal(t, a, do(t, a, "POST", "/console/webhooks", cookie, url.Values{"csrf": {csrf}, "name": {"won deals"},
		"url": {"https://hooks.example.com/won"}, "triggers": {"outcome.deal_won, outcome.deal_lost note.added"},
		"new_secret": {"yes"}, "max_attempts": {"3"}, "timeout_seconds": {""}}), cookie)
	page := body(t, resp)
	secret := regexp.MustCompile(`<code data-secret id="secret">(whsec_[^<]+)</code>`).FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || secret == nil {
		t.Fatalf("create: %d %s", resp.StatusCode, page)
	}
	items := api(t, a, key, "GET", "/v1/configs?type=webhook")["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("configs after create: %v", items)
	}
	cfg := items[0].(map[string]any)
	id := cfg["id"].(string)
	st := cfg["settings"].(map[string]any)
	if cfg["name"] != "won deals" || cfg["version"] != float64(1) || len(st["triggers"].([]any)) != 3 ||
		st["retry"].(map[string]any)["max_attempts"] != float64(3) || !strings.Contains(page, st["secret_ref"].(string)) {
		t.Fatalf("created config %v (page %s)", cfg, page)
	}
	if row := webhookRow(t, a, cookie, id); strings.Contains(row, secret[1]) || !strings.Contains(row, "<td>1</td>") {
		t.Errorf("row after create (the secret must not show again): %s", row)
	}
	// A name within prose is isolated: a right-to-left override in it
	// would reorder the text after it.
	if list := body(t, do(t, a, "GET", "/console/webhooks", cookie, nil)); !strings.Contains(list, " for <bdi>won deals</bdi>)") {
		t.Errorf("the secret references do not isolate the config's name:\n%s", list)
	}

	// Edit: prefilled from version 1, saved as version 2.
	resp = do(t, a, "GET", "/console/webhooks/"+id+"/edit", cookie, nil)
	form = body(t, resp)
	for _, want := range []string{`value="https://hooks.example.com/won"`, `value="outcome.deal_won, outcome.deal_lost, note.added"`,
		`value="` + st["secret_ref"].(string) + `"`, `id="max_attempts" name="max_attempts" value="3"`, `name="version" value="1"`,
		`<title>Factline console: Edit webhook ` + id + `</title>`} {
		if !strings.Contains(form, html.EscapeString(want)) && !strings.Contains(form, want) {
			t.Errorf("edit form lacks %s:\n%s", want, form)
		}
	}
	resp = do(t, a, "POST", "/console/webhooks/"+id, cookie, url.Values{"csrf": {csrf}, "version": {"1"}, "name": {"won deals"},
		"url": {"https://hooks.example.com/v2"}, "triggers": {"outcome.deal_won"}, "secret_ref": {st["secret_ref"].(string)},
		"max_attempts": {"3"}, "timeout_seconds": {"45"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", resp.StatusCode, body(t, resp))
	}
	cur := api(t, a, key, "GET", "/v1/configs/"+id)
	if cur["version"] != float64(2) || cur["settings"].(map[string]any)["url"] != "https://hooks.example.com/v2" ||
		cur["settings"].(map[string]any)["retry"].(map[string]any)["timeout_seconds"] != float64(45) {
		t.Fatalf("after edit: %v", cur)
	}
	if row := webhookRow(t, a, cookie, id); !strings.Contains(row, "<td>2</td>") || !strings.Contains(row, `class="pause"`) {
		t.Errorf("row after edit: %s", row)
	}
	// Rotating the secret asks for its box to be ticked first.
	resp = do(t, a, "POST", "/console/webhooks/"+id+"/rotate-secret", cookie, url.Values{"csrf": {csrf}})
	if page := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Tick the box to confirm rotating") || strings.Contains(page, "whsec_") {
		t.Errorf("an unconfirmed rotate: %d, want 400 and no secret:\n%s", resp.StatusCode, page)
	}
	// A stale form (version 1) is refused, not applied over version 2.
	resp = do(t, a, "POST", "/console/webhooks/"+id, cookie, url.Values{"csrf": {csrf}, "version": {"1"}, "name": {"stale"},
		"url": {"https://hooks.example.com/stale"}, "triggers": {"outcome.deal_won"}, "secret_ref": {st["secret_ref"].(string)}})
	if page := body(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(page, `id="form-problem"`) ||
		!strings.Contains(page, `value="https://hooks.example.com/stale"`) {
		t.Errorf("stale edit: %d %s", resp.StatusCode, page)
	}

	// Pause, then resume.
	resp = do(t, a, "POST", "/console/webhooks/"+id+"/pause", cookie, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pause: %d %s", resp.StatusCode, body(t, resp))
	}
	if items := api(t, a, key, "GET", "/v1/admin/webhooks/paused")["items"].([]any); len(items) != 1 {
		t.Fatalf("paused after pause: %v", items)
	}
	if row := webhookRow(t, a, cookie, id); !strings.Contains(row, "active, paused") || !strings.Contains(row, `class="resume"`) || strings.Contains(row, `class="pause"`) {
		t.Errorf("row of a paused config: %s", row)
	}
	resp = do(t, a, "POST", "/console/webhooks/"+id+"/pause", cookie, url.Values{"csrf": {csrf}})
	if page := body(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(page, `id="problem"`) || strings.Contains(page, `"status":409`) {
		t.Errorf("pause twice: %d %s", resp.StatusCode, page)
	}
	resp = do(t, a, "POST", "/console/webhooks/"+id+"/resume", cookie, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume: %d %s", resp.StatusCode, body(t, resp))
	}
	if row := webhookRow(t, a, cookie, id); strings.Contains(row, "paused") || !strings.Contains(row, `class="pause"`) {
		t.Errorf("row after resume: %s", row)
	}

	// Archive: a confirmation first.
	resp = do(t, a, "GET", "/console/webhooks/"+id+"/archive", cookie, nil)
	if page := body(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="confirm-archive"`) {
		t.Fatalf("archive confirmation: %d %s", resp.StatusCode, page)
	}
	resp = do(t, a, "POST", "/console/webhooks/"+id+"/archive", cookie, url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusBadRequest || api(t, a, key, "GET", "/v1/configs/"+id)["status"] != "active" {
		t.Fatalf("archive without confirming: %d", resp.StatusCode)
	}
	resp = do(t, a, "POST", "/console/webhooks/"+id+"/archive", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther || api(t, a, key, "GET", "/v1/configs/"+id)["status"] != "archived" {
		t.Fatalf("archive: %d %s", resp.StatusCode, body(t, resp))
	}
	if row := webhookRow(t, a, cookie, id); !strings.Contains(row, "archived") || strings.Contains(row, `class="edit"`) {
		t.Errorf("row after archive: %s", row)
	}
	if page := body(t, do(t, a, "GET", "/console/webhooks/"+id+"/archive", cookie, nil)); strings.Contains(page, `id="confirm-archive"`) ||
		!strings.Contains(page, "is archived already") {
		t.Errorf("archive confirmation of an archived config: %s", page)
	}
	// An archived config has no edit form: the API would refuse the save.
	resp = do(t, a, "GET", "/console/webhooks/"+id+"/edit", cookie, nil)
	if page := body(t, resp); resp.StatusCode != http.StatusConflict || strings.Contains(page, `id="webhook-form"`) ||
		!strings.Contains(page, "is archived; only an active config can be edited") || !regexp.MustCompile(`Trace id <code>\S+</code>`).MatchString(page) {
		t.Errorf("edit form of an archived config (a 409 with the request's trace id): %d %s", resp.StatusCode, page)
	}
}

// The API's validation problems show beside their fields, in a form that
// keeps what was typed; a new secret is made only for a config the API
// accepts.
func TestWebhookFormShowsValidationProblems(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, key)
	resp := do(t, a, "POST", "/console/webhooks", cookie, url.Values{"csrf": {csrf}, "name": {"typed name"},
		"url": {"http://insecure"}, "triggers": {"Bad-Trigger"}, "new_secret": {"yes"}, "max_attempts": {"99"}, "timeout_seconds": {"soon"}})
	page := body(t, resp)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("invalid webhook: %d %s", resp.StatusCode, page)
	}
	for _, f := range []string{"url", "triggers", "max_attempts", "timeout_seconds"} {
		m := regexp.MustCompile(`<span class="problem field-error" id="` + f + `-error">([^<]+)</span>`).FindStringSubmatch(page)
		if m == nil || strings.TrimSpace(m[1]) == "" {
			t.Errorf("no problem beside %s:\n%s", f, page)
		}
		if !strings.Contains(page, `id="`+f+`" name="`+f+`"`) || !strings.Contains(page, `aria-describedby="`+f+`-error"`) {
			t.Errorf("field %s is not marked invalid", f)
		}
	}
	// Two problems of one field read as two, not as one run-on sentence.
	resp = do(t, a, "POST", "/console/webhooks", cookie, url.Values{"csrf": {csrf}, "name": {"two"},
		"url": {"http://10.0.0.1/x"}, "triggers": {"deposit.manual"}})
	two := body(t, resp)
	m := regexp.MustCompile(`<span class="problem field-error" id="url-error">([^<]+)</span>`).FindStringSubmatch(two)
	if m == nil || !strings.Contains(m[1], "followed by a host; url") {
		t.Errorf("two problems of url, want them separated by \"; \": %q", m)
	}
	// Neither a new secret nor a reference: the problem says so in the
	// form's words; it said the reference "must be webhook_secret_
	// followed by lowercase letters and digits".
	resp = do(t, a, "POST", "/console/webhooks", cookie, url.Values{"csrf": {csrf}, "name": {"none"},
		"url": {"https://hooks.example.com/ok"}, "triggers": {"outcome.deal_won"}, "secret_ref": {""}})
	none := body(t, resp)
	m = regexp.MustCompile(`<span class="problem field-error" id="secret_ref-error">([^<]+)</span>`).FindStringSubmatch(none)
	if resp.StatusCode != http.StatusBadRequest || m == nil || !strings.Contains(html.UnescapeString(m[1]), `Choose a secret: tick "Create a new secret", or give the reference of an existing one`) {
		t.Errorf("no secret chosen: %d, beside the reference %q", resp.StatusCode, m)
	}
	for _, typed := range []string{`value="typed name"`, `value="http://insecure"`, `value="Bad-Trigger"`, `value="99"`, `value="soon"`} {
		if !strings.Contains(page, typed) {
			t.Errorf("the form lost %s", typed)
		}
	}
	if strings.Contains(page, `"errors"`) || strings.Contains(page, `"field"`) {
		t.Errorf("raw problem JSON in the page:\n%s", page)
	}
	// The secret the form asked for is made only once the rest is
	// accepted: nothing is stored for a refused form, and the box stays
	// ticked with no problem beside the reference.
	if strings.Contains(page, `id="created-secret"`) || !strings.Contains(page, `name="new_secret" value="yes" checked`) ||
		strings.Contains(page, `id="secret_ref-error"`) {
		t.Fatalf("the refused form's secret choice:\n%s", page)
	}
	if kid, err := a.Store.WebhookSecretKeyID(context.Background()); err != nil || kid != "" {
		t.Fatalf("a secret was stored for a refused config (key id %q, %v)", kid, err)
	}
	if items := api(t, a, key, "GET", "/v1/configs?type=webhook")["items"].([]any); len(items) != 0 {
		t.Errorf("an invalid config was created: %v", items)
	}

	// Fixed and sent again: created, with its new secret shown once.
	resp = reveal(t, a, do(t, a, "POST", "/console/webhooks", cookie, url.Values{"csrf": {csrf}, "name": {"typed name"},
		"url": {"https://hooks.example.com/ok"}, "triggers": {"outcome.deal_won"}, "new_secret": {"yes"}}), cookie)
	page = body(t, resp)
	secret := regexp.MustCompile(`<code data-secret id="secret">(whsec_[^<]+)</code>`).FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || secret == nil {
		t.Fatalf("fixed webhook: %d %s", resp.StatusCode, page)
	}
	items := api(t, a, key, "GET", "/v1/configs?type=webhook")["items"].([]any)
	if len(items) != 1 || !strings.Contains(page, items[0].(map[string]any)["settings"].(map[string]any)["secret_ref"].(string)) {
		t.Fatalf("configs: %v", items)
	}

	// A reference typed beside the ticked box (ticked by default) is
	// used: no other secret is made.
	ref := items[0].(map[string]any)["settings"].(map[string]any)["secret_ref"].(string)
	resp = do(t, a, "POST", "/console/webhooks", cookie, url.Values{"csrf": {csrf}, "name": {"second"},
		"url": {"https://hooks.example.com/two"}, "triggers": {"outcome.deal_won"}, "new_secret": {"yes"}, "secret_ref": {ref}})
	if page := body(t, resp); resp.StatusCode != http.StatusSeeOther || strings.Contains(page, "whsec_") {
		t.Fatalf("webhook with a typed reference: %d %s", resp.StatusCode, page)
	}
	for _, it := range api(t, a, key, "GET", "/v1/configs?type=webhook")["items"].([]any) {
		if got := it.(map[string]any)["settings"].(map[string]any)["secret_ref"]; got != ref {
			t.Errorf("config %v uses %v, want the typed %s", it.(map[string]any)["name"], got, ref)
		}
	}
}

// Live keys neither see nor reach the management views.
func TestLiveKeyCannotManageWebhooks(t *testing.T) {
	a := setup(t, app.Config{})
	live, _ := newKey(t, a, "acme", auth.ModeLive)
	cookie, csrf := signIn(t, a, live)
	if page := body(t, do(t, a, "GET", "/console/webhooks", cookie, nil)); strings.Contains(page, "/console/webhooks/new") {
		t.Errorf("a live key sees New webhook")
	} else if !strings.Contains(page, `id="pause-note"`) {
		// Pauses are read through an admin endpoint: the page says its
		// state column cannot show them to this key.
		t.Errorf("a live key's webhooks view does not say pauses are not shown:\n%s", page)
	}
	for _, r := range []struct{ method, path string }{{"GET", "/console/webhooks/new"}, {"POST", "/console/webhooks"},
		{"GET", "/console/webhooks/cfg_x/edit"}, {"POST", "/console/webhooks/cfg_x/pause"}, {"POST", "/console/webhooks/cfg_x/archive"}} {
		var form url.Values
		if r.method == "POST" {
			form = url.Values{"csrf": {csrf}, "confirm": {"yes"}, "url": {"https://hooks.example.com/x"}}
		}
		if resp := do(t, a, r.method, r.path, cookie, form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s with a live key: %d", r.method, r.path, resp.StatusCode)
		}
	}
	// An admin view refused to a live key shows a browser the refusal
	// alone, not the view's empty table and forms under it.
	for _, path := range []string{"/console/keys", "/console/dead-letters"} {
		resp := browse(t, a, path, cookie)
		if page := body(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, `id="problem"`) ||
			strings.Contains(page, "<table") || strings.Contains(page, `method="post" action="/console/keys"`) {
			t.Errorf("GET %s with a live key: %d %s", path, resp.StatusCode, page)
		}
	}
}

// TestWebhookViewsRefuseOtherConfigs: the edit form and the archive
// question are a webhook's; another config's id is not found there (the
// archive would have archived a projection's config).
func TestWebhookViewsRefuseOtherConfigs(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, key)
	r := httptest.NewRequest("POST", "/v1/configs", strings.NewReader(`{"type":"limits","settings":{"max":1}}`))
	r.Header.Set("X-API-Key", key)
	r.Header.Set("Content-Type", "application/json")
	resp, err := a.Server.App().Test(r, -1)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a config: %v %v", resp.StatusCode, err)
	}
	var env struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	id := env.Data.ID
	for _, path := range []string{"/edit", "/archive"} {
		resp := do(t, a, "GET", "/console/webhooks/"+id+path, cookie, nil)
		if page := body(t, resp); resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "is a limits config") {
			t.Errorf("GET %s of a limits config: %d %s", path, resp.StatusCode, page)
		}
	}
	resp = do(t, a, "POST", "/console/webhooks/"+id+"/archive", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusNotFound || api(t, a, key, "GET", "/v1/configs/"+id)["status"] != "active" {
		t.Fatalf("archive of a limits config through the webhook view: %d, status %v", resp.StatusCode, api(t, a, key, "GET", "/v1/configs/"+id)["status"])
	}
}

// formTrace is the trace id the webhook form's problem box shows, or "".
func formTrace(page string) string {
	m := regexp.MustCompile(`(?s)<div class="problem" role="alert" id="form-problem">.*?<small class="trace">Trace id <code>([^<]+)</code></small></div>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// A refused webhook form shows the refused request's trace id, as every
// other problem the console shows does: an operator finds the log line
// by it.
func TestWebhookFormProblemShowsTraceID(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, key)
	ref := apiDo(t, a, key, "POST", "/v1/admin/webhooks/secrets", nil)["secret_ref"].(string)
	id := apiDo(t, a, key, "POST", "/v1/configs", map[string]any{"type": "webhook", "name": "ok",
		"settings": map[string]any{"url": "https://hooks.example.com/ok", "secret_ref": ref, "triggers": []string{"note.added"}}})["id"].(string)
	for _, tc := range []struct {
		name, path string
		form       url.Values
		status     int
	}{
		{"create", "/console/webhooks", url.Values{"name": {"x"}, "url": {"http://insecure"}, "triggers": {"note.added"}, "new_secret": {"yes"}}, 400},
		{"edit", "/console/webhooks/" + id, url.Values{"version": {"1"}, "name": {"x"}, "url": {"http://insecure"}, "triggers": {"note.added"}, "secret_ref": {ref}}, 400},
		{"stale edit", "/console/webhooks/" + id, url.Values{"version": {"7"}, "name": {"x"}, "url": {"https://hooks.example.com/x"}, "triggers": {"note.added"}, "secret_ref": {ref}}, 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", csrf)
			resp := doAccepting(t, a, "POST", tc.path, cookie, tc.form, "text/html")
			page := body(t, resp)
			if resp.StatusCode != tc.status || !strings.Contains(page, `id="webhook-form"`) || formTrace(page) == "" {
				t.Errorf("%d, want %d and the form with the request's trace id in its problem box:\n%s", resp.StatusCode, tc.status, page)
			}
		})
	}
}

// An edit refused because the config changed since its form was opened
// (409) shows the form again with what the user typed, the current
// version's values beside the fields where they differ, and the current
// version in its hidden field: sending it again saves, where the form
// used to carry the old version and answer 409 forever. Nothing is saved
// until the user sends it again.
func TestStaleWebhookEditCanBeSentAgain(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, csrf := signIn(t, a, key)
	ref := apiDo(t, a, key, "POST", "/v1/admin/webhooks/secrets", nil)["secret_ref"].(string)
	settings := func(url string, triggers ...string) map[string]any {
		return map[string]any{"url": url, "secret_ref": ref, "triggers": triggers, "retry": map[string]any{"max_attempts": 3}}
	}
	id := apiDo(t, a, key, "POST", "/v1/configs", map[string]any{"type": "webhook", "name": "orig",
		"settings": settings("https://hooks.example.com/one", "note.added")})["id"].(string)
	version := regexp.MustCompile(`name="version" value="(\d+)"`)
	if m := version.FindStringSubmatch(body(t, browse(t, a, "/console/webhooks/"+id+"/edit", cookie))); m == nil || m[1] != "1" {
		t.Fatalf("the edit form's version: %v, want 1", m)
	}
	// Someone else saves version 2 meanwhile.
	apiDo(t, a, key, "PUT", "/v1/configs/"+id, map[string]any{"version": 1, "name": "orig",
		"settings": settings("https://hooks.example.com/two", "note.added", "note.removed")})

	mine := url.Values{"csrf": {csrf}, "version": {"1"}, "name": {"mine"}, "url": {"https://hooks.example.com/mine"},
		"triggers": {"note.added"}, "secret_ref": {ref}, "max_attempts": {"3"}, "timeout_seconds": {"30"}}
	resp := doAccepting(t, a, "POST", "/console/webhooks/"+id, cookie, mine, "text/html")
	page := body(t, resp)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, `id="changed"`) {
		t.Fatalf("stale edit: %d, want 409 saying the config changed:\n%s", resp.StatusCode, page)
	}
	if m := version.FindStringSubmatch(page); m == nil || m[1] != "2" {
		t.Errorf("the form shown again carries version %v, want the current 2", m)
	}
	for _, want := range []string{`id="name" name="name" value="mine"`, `id="url" name="url" value="https://hooks.example.com/mine"`,
		`id="triggers" name="triggers" value="note.added"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the form lost what was typed: no %s", want)
		}
	}
	current := func(field string) string {
		m := regexp.MustCompile(`<span class="current" id="` + field + `-current">([^\n]*?)</span>`).FindStringSubmatch(page)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for field, want := range map[string]string{"name": "Version 2: <code>orig</code>", "url": "Version 2: <code>https://hooks.example.com/two</code>",
		"triggers": "Version 2: <code>note.added, note.removed</code>", "secret_ref": "", "max_attempts": "", "timeout_seconds": ""} {
		if got := current(field); got != want {
			t.Errorf("beside %s: %q, want %q", field, got, want)
		}
	}
	if cur := api(t, a, key, "GET", "/v1/configs/"+id); cur["version"] != float64(2) || cur["name"] != "orig" {
		t.Fatalf("the refused edit changed the config: %v", cur)
	}

	// Sent again as shown (the user keeps their values): saved over
	// version 2.
	mine.Set("version", version.FindStringSubmatch(page)[1])
	if resp := doAccepting(t, a, "POST", "/console/webhooks/"+id, cookie, mine, "text/html"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the form sent again: %d, want 303\n%s", resp.StatusCode, body(t, resp))
	}
	cur := api(t, a, key, "GET", "/v1/configs/"+id)
	if cur["version"] != float64(3) || cur["name"] != "mine" || cur["settings"].(map[string]any)["url"] != "https://hooks.example.com/mine" {
		t.Errorf("after sending again: %v, want version 3 with the user's values", cur)
	}
}
