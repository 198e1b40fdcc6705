package console_test

import (
	"bytes"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/sdk/webhookverify"
)

// apiDo calls the app's API with a key and returns the envelope's data.
func apiDo(t *testing.T, a *app.App, key, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Header.Set("X-API-Key", key)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.Server.App().Test(r, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return env.Data
}

func read(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A live key's portal lists its tenant's deliveries and shows how to check
// a signature, naming the config's secret reference but never a secret;
// it has no write buttons, and a write it forges through the console is
// refused with a 403.
func TestLiveKeyPortalShowsDeliveriesAndSignatureHelp(t *testing.T) {
	a := setup(t, app.Config{})
	addDeliveries(t, a.Store, "acme", 5)
	addDeliveries(t, a.Store, "other", 3)
	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	live, _ := newKey(t, a, "acme", auth.ModeLive)
	sec := apiDo(t, a, admin, "POST", "/v1/admin/webhooks/secrets", nil)
	ref, secret := sec["secret_ref"].(string), sec["secret"].(string)
	cfg := apiDo(t, a, admin, "POST", "/v1/configs", map[string]any{"type": "webhook", "name": "orders",
		"settings": map[string]any{"url": "https://hooks.example/in", "secret_ref": ref, "triggers": []string{"note.added"}}})["id"].(string)
	cookie, csrf := signIn(t, a, live)

	resp := do(t, a, "GET", "/console/deliveries", cookie, nil)
	page := read(t, resp)
	rows := regexp.MustCompile(`<tr data-delivery="del_fct_([a-z]+)_`).FindAllStringSubmatch(page, -1)
	if resp.StatusCode != http.StatusOK || len(rows) != 5 {
		t.Fatalf("live key's deliveries: %d, %d rows, want 200 with the tenant's 5:\n%s", resp.StatusCode, len(rows), page)
	}
	for _, r := range rows {
		if r[1] != "acme" {
			t.Errorf("live key sees a delivery of %s", r[1])
		}
	}
	if !strings.Contains(page, `id="nav-deliveries"`) {
		t.Error("live key's nav has no deliveries")
	}
	id := regexp.MustCompile(`data-delivery="([^"]+)"`).FindStringSubmatch(page)[1]
	if resp := do(t, a, "GET", "/console/deliveries/"+id, cookie, nil); resp.StatusCode != http.StatusOK ||
		!strings.Contains(read(t, resp), `id="attempts"`) {
		t.Errorf("live key's delivery page: %d", resp.StatusCode)
	}

	resp = do(t, a, "GET", "/console/webhooks", cookie, nil)
	page = read(t, resp)
	for _, want := range []string{`id="signature-help"`, "X-Svc-Signature", "X-Svc-Timestamp", "X-Svc-Delivery-Id",
		`<code id="signed-string">&lt;X-Svc-Timestamp&gt;.&lt;body&gt;</code>`, `data-config="` + cfg + `">` + ref + `</code>`,
		"webhookverify.Verify(", "openssl dgst -sha256 -hmac"} {
		if !strings.Contains(page, want) {
			t.Errorf("the portal lacks %q", want)
		}
	}
	if strings.Contains(page, secret) || strings.Contains(page, `class="rotate"`) || strings.Contains(page, `class="resume"`) {
		t.Error("the live key's portal shows a secret or a write button")
	}

	// Forged write: refused before it reaches the API (which would
	// refuse it too), as a page to a browser.
	resp = doAccepting(t, a, "POST", "/console/dead-letters/"+id+"/replay", cookie, url.Values{"csrf": {csrf}}, "text/html")
	if page := read(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, `id="problem"`) {
		t.Errorf("live key's replay through the console: %d, want a 403 in the page:\n%s", resp.StatusCode, page)
	}
}

// The portal's openssl recipe, run as shown, accepts a delivery signed the
// way the gateway signs and refuses a changed body.
func TestSignatureHelpShellRecipeVerifies(t *testing.T) {
	a := setup(t, app.Config{})
	live, _ := newKey(t, a, "acme", auth.ModeLive)
	cookie, _ := signIn(t, a, live)
	page := read(t, do(t, a, "GET", "/console/webhooks", cookie, nil))
	m := regexp.MustCompile(`(?s)<pre id="verify-shell"><code>(.*?)</code></pre>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no shell recipe in the portal")
	}
	script := html.UnescapeString(m[1])
	secret, ts := "whsec_c2VjcmV0K3dpdGgvc2xhc2hlcz0=", int64(1_700_000_000)
	body := []byte(`{"delivery_id":"del_1","data":{"note":"two\nlines"}}` + "\n")
	sig := webhookverify.Sign([]byte(secret), ts, body)
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{{"signed body", body, "valid"}, {"changed body", append([]byte(nil), append(body, ' ')...), "invalid"}} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "body.json"), c.body, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TS="+strconv.FormatInt(ts, 10), "SIG="+sig, "SECRET="+secret)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("%s: the recipe printed %q (%v), want %s", c.name, out, err, c.want)
		}
	}
}

// Bulk replay asks first: the confirmation counts the dead letters, a
// post without the confirmation replays nothing, the confirmed one
// replays them all through the API; a live key gets a 403.
func TestBulkReplayNeedsConfirmation(t *testing.T) {
	a := setup(t, app.Config{})
	addDeliveries(t, a.Store, "acme", 9) // dead: 0, 3, 6
	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	live, _ := newKey(t, a, "acme", auth.ModeLive)
	cookie, csrf := signIn(t, a, admin)
	dead := func() int {
		return len(apiDo(t, a, admin, "GET", "/v1/admin/webhooks/deliveries?status=dead", nil)["items"].([]any))
	}
	page := read(t, do(t, a, "GET", "/console/dead-letters/replay-all", cookie, nil))
	if !strings.Contains(page, "Replay <b>3</b> dead letters") || !strings.Contains(page, `id="confirm-replay-all"`) {
		t.Fatalf("confirmation page:\n%s", page)
	}
	if resp := do(t, a, "POST", "/console/dead-letters/replay-all", cookie, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusBadRequest || dead() != 3 {
		t.Fatalf("unconfirmed bulk replay: %d, %d dead left", resp.StatusCode, dead())
	}
	resp := do(t, a, "POST", "/console/dead-letters/replay-all", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "3+dead+letters+replayed") || dead() != 0 {
		t.Fatalf("confirmed bulk replay: %d %s, %d dead left", resp.StatusCode, loc, dead())
	}
	lc, lcsrf := signIn(t, a, live)
	if resp := do(t, a, "POST", "/console/dead-letters/replay-all", lc, url.Values{"csrf": {lcsrf}, "confirm": {"yes"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("live key's bulk replay: %d, want 403", resp.StatusCode)
	}
}

// The dead-letter filter follows the next page and the bulk replay, and
// stays in its box.
func TestDeadLetterFilterIsKept(t *testing.T) {
	a := setup(t, app.Config{})
	addDeliveries(t, a.Store, "acme", 200) // 67 dead letters of cfg_1
	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, _ := signIn(t, a, admin)
	page := read(t, do(t, a, "GET", "/console/dead-letters?config_id=cfg_1", cookie, nil))
	for _, want := range []string{
		`<input id="config_id" name="config_id" value="cfg_1">`,
		`href="/console/dead-letters/replay-all?config_id=cfg_1"`,
		`&amp;config_id=cfg_1">Next page</a>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("filtered dead letters lack %s:\n%s", want, page)
		}
	}
	confirm := read(t, do(t, a, "GET", "/console/dead-letters/replay-all?config_id=cfg_1", cookie, nil))
	if !strings.Contains(confirm, "of config <code>cfg_1</code>") || !strings.Contains(confirm, `name="config_id" value="cfg_1"`) {
		t.Errorf("the bulk replay from a filtered page is not the config's:\n%s", confirm)
	}
}

// A filter the API refuses comes back in its form beside the problem, to
// be corrected rather than typed again.
func TestRefusedStatsFilterKeepsItsForm(t *testing.T) {
	a := setup(t, app.Config{})
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cookie, _ := signIn(t, a, key)
	resp := do(t, a, "GET", "/console/delivery-stats?from=2024-03-01T00:00&to=2024-03-01T06:00&buckets=0", cookie, nil)
	page := read(t, resp)
	for _, want := range []string{`id="stats-form"`, `name="from" value="2024-03-01T00:00"`, `name="to" value="2024-03-01T06:00"`, `value="0"`, `id="problem"`, "buckets must be an integer from 1 to 1000"} {
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, want) {
			t.Fatalf("refused stats filter: %d, page lacks %s:\n%s", resp.StatusCode, want, page)
		}
	}
}
