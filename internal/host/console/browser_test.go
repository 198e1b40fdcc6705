package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/internal/testutil"
)

// artifacts is where screenshots go: $FACTLINE_ARTIFACTS, else a
// directory under the test's TempDir.
func artifacts(t *testing.T) string {
	dir := os.Getenv("FACTLINE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serve runs the app on a loopback listener and returns its base URL.
func serve(t *testing.T, a *app.App) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, func(ad net.Addr) { addr <- ad }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case ad := <-addr:
		return "http://" + ad.String()
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	return ""
}

// TestBrowser drives the console in one Chromium shared by the subtests.
func TestBrowser(t *testing.T) {
	ledgerV1, ledgerV2, cacheDir := ledgerVersions(t)
	rc := newReceiver(t)
	a := setup(t, app.Config{Addr: "127.0.0.1:0", PluginCacheDir: cacheDir,
		WebhookAllowNetworks: "127.0.0.1/32", WebhookTLS: rc.tlsConfig()})
	base := serve(t, a)
	out := artifacts(t)
	t.Logf("screenshots in %s", out)

	// run does the actions in a fresh tab with no cookies, within a minute.
	run := chromeTabs(t)

	operator, _ := newKey(t, a, "operator", auth.ModeAdmin)
	acmeAdmin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	acmeLive, _ := newKey(t, a, "acme", auth.ModeLive)

	signIn := func(key string) chromedp.Action {
		return chromedp.Tasks{
			chromedp.Navigate(base + "/console/sign-in"),
			chromedp.SendKeys("#key", key, chromedp.ByID),
			chromedp.Click("#sign-in", chromedp.ByID),
			chromedp.WaitVisible("#tenant", chromedp.ByID),
		}
	}
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var buf []byte
			if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(out, name+".png"), buf, 0o644)
		})
	}
	text := func(sel string, s *string) chromedp.Action { return chromedp.Text(sel, s, chromedp.ByQuery) }

	t.Run("SignInPage", func(t *testing.T) {
		run(t, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible("#key", chromedp.ByID), shot("sign-in"))
	})

	// Refusals read as console pages: an unknown page opened directly, and
	// one reached through the boosted navigation, which htmx swaps in
	// although it answers 404.
	t.Run("RefusalPages", func(t *testing.T) {
		var direct, boosted, loc string
		var swapped bool
		run(t, signIn(acmeAdmin),
			chromedp.Navigate(base+"/console/no-such-page"), chromedp.WaitVisible("#problem", chromedp.ByID), text("#problem", &direct),
			chromedp.Navigate(base+"/console/webhooks"), chromedp.WaitVisible("#nav-deliveries", chromedp.ByID),
			// A link in the boosted navigation to a page that answers 404.
			chromedp.Evaluate(`const a = document.createElement("a"); a.id = "gone"; a.href = "/console/gone"; a.textContent = "Gone";
				document.querySelector("nav").appendChild(a); htmx.process(a); window.sameDocument = true; true`, nil),
			chromedp.Click("#gone", chromedp.ByID),
			chromedp.WaitVisible("#problem", chromedp.ByID),
			text("#problem", &boosted), chromedp.Location(&loc), chromedp.Evaluate(`window.sameDocument === true`, &swapped), shot("refusal-page"))
		if !swapped {
			t.Errorf("the click loaded a new document: htmx did not handle it")
		}
		for name, got := range map[string]string{"direct": direct, "boosted": boosted} {
			if !strings.Contains(got, "404 Not Found") || !strings.Contains(got, "No route matches GET /console/") || !strings.Contains(got, "Trace id") {
				t.Errorf("%s: the problem box says %q", name, got)
			}
		}
		if !strings.HasSuffix(loc, "/console/gone") {
			t.Errorf("after the boosted click the location is %s", loc)
		}
	})

	// Keyboard only: the key field has the focus, Enter signs in, Tab
	// reaches the views' links and Enter opens one.
	t.Run("KeyboardOnly", func(t *testing.T) {
		var focused string
		tabTo := func(id string) chromedp.Action {
			return chromedp.ActionFunc(func(ctx context.Context) error {
				for range 40 {
					if err := chromedp.KeyEvent("\t").Do(ctx); err != nil {
						return err
					}
					if err := chromedp.Evaluate(`document.activeElement ? document.activeElement.id : ""`, &focused).Do(ctx); err != nil {
						return err
					}
					if focused == id {
						return nil
					}
				}
				return fmt.Errorf("40 presses of Tab did not reach #%s (last focus: %q)", id, focused)
			})
		}
		run(t, chromedp.Navigate(base+"/console/sign-in"), chromedp.WaitVisible("#key", chromedp.ByID),
			chromedp.Evaluate(`document.activeElement.id`, &focused),
			chromedp.ActionFunc(func(context.Context) error {
				if focused != "key" {
					return fmt.Errorf("the sign-in page opens with the focus on %q, not the key field", focused)
				}
				return nil
			}),
			chromedp.KeyEvent(acmeAdmin), chromedp.KeyEvent("\r"),
			chromedp.WaitVisible("#tenant", chromedp.ByID),
			tabTo("nav-deliveries"), chromedp.KeyEvent("\r"),
			chromedp.WaitVisible("#deliveries", chromedp.ByID))
	})

	t.Run("OperatorSeesPlugins", func(t *testing.T) {
		var nav, table, problem string
		run(t, signIn(operator),
			chromedp.WaitVisible("#plugins", chromedp.ByID), text("nav", &nav), text("#plugins", &table), shot("plugins"),
			// A module the API refuses: its problem is shown in the page.
			chromedp.SendKeys("#name", "account", chromedp.ByID),
			chromedp.SetUploadFiles("#module", []string{writeFile(t, "broken.wasm", "\x00asm not really")}, chromedp.ByID),
			chromedp.Submit("#upload", chromedp.ByID),
			chromedp.WaitVisible("#problem", chromedp.ByID), text("#problem", &problem), shot("plugins-refused"),
			chromedp.Navigate(base+"/console/domain"), chromedp.WaitVisible("#entity-types", chromedp.ByID), shot("domain"),
			chromedp.Navigate(base+"/console/stream"), chromedp.WaitVisible("#consumers", chromedp.ByID), shot("stream"))
		if !strings.Contains(nav, "Plugins") || !strings.Contains(nav, "Domain") || !strings.Contains(nav, "Stream") || !strings.Contains(nav, "Dead letters") {
			t.Errorf("operator nav %q", nav)
		}
		if !strings.Contains(problem, "422") || !strings.Contains(problem, "was refused") {
			t.Errorf("refused upload shows %q, want the API's 422 problem", problem)
		}
	})

	t.Run("TenantAdminSeesNoOperatorViews", func(t *testing.T) {
		var nav, tenant, problem string
		run(t, signIn(acmeAdmin), text("nav", &nav), text("#tenant", &tenant),
			chromedp.WaitVisible("#dead-letters", chromedp.ByID), shot("dead-letters"),
			chromedp.Navigate(base+"/console/plugins"), chromedp.WaitVisible("#problem", chromedp.ByID), text("#problem", &problem))
		if strings.Contains(nav, "Plugins") || !strings.Contains(nav, "Dead letters") || !strings.Contains(nav, "Deliveries") || tenant != "acme" {
			t.Errorf("tenant admin nav %q, tenant %q", nav, tenant)
		}
		if !strings.Contains(problem, "403") {
			t.Errorf("tenant admin on /console/plugins sees %q, want 403", problem)
		}
	})

	t.Run("LiveKeyReadsWebhooksOnly", func(t *testing.T) {
		var nav, body string
		run(t, signIn(acmeLive), chromedp.WaitVisible("#webhooks", chromedp.ByID), text("nav", &nav), shot("webhooks-portal"),
			chromedp.Navigate(base+"/console/dead-letters"), chromedp.WaitVisible("#problem", chromedp.ByID), text("main", &body))
		if strings.Contains(nav, "Dead letters") || strings.Contains(nav, "Plugins") || !strings.Contains(nav, "Deliveries") {
			t.Errorf("live key nav %q", nav)
		}
		if !strings.Contains(body, "403") {
			t.Errorf("live key on dead letters sees %q, want a 403", body)
		}
	})

	t.Run("OperatorUploadsAndRollsBackPlugin", func(t *testing.T) {
		// The form answers with the plugins view again; each step waits for
		// the row of the version it should show.
		row := func(v string) string { return `tr[data-plugin="ledger"][data-version="` + v + `"]` }
		upload := func(path, v string) chromedp.Action {
			return chromedp.Tasks{
				chromedp.SendKeys("#name", "ledger", chromedp.ByID),
				chromedp.SetUploadFiles("#module", []string{path}, chromedp.ByID),
				chromedp.Submit("#upload", chromedp.ByID),
				chromedp.WaitVisible(row(v), chromedp.ByQuery),
			}
		}
		var notice, previous string
		var sendable bool
		run(t, signIn(operator), chromedp.WaitVisible("#plugins", chromedp.ByID),
			upload(ledgerV1, "1.0.0"), upload(ledgerV2, "2.0.0"), shot("plugins-uploaded"),
			text(row("2.0.0")+` td.previous`, &previous),
			// The browser sends the roll back only with its box ticked.
			chromedp.Evaluate(`document.querySelector('`+row("2.0.0")+` button.rollback').form.checkValidity()`, &sendable),
			chromedp.Click(row("2.0.0")+` input.confirm-rollback`, chromedp.ByQuery),
			chromedp.Click(row("2.0.0")+` button.rollback`, chromedp.ByQuery),
			chromedp.WaitVisible(row("1.0.0"), chromedp.ByQuery), text("#notice", &notice), shot("plugins-rolled-back"))
		if sendable {
			t.Error("the roll back form could be sent without its confirmation box ticked")
		}
		// The previous build is named by its digest too.
		if v1 := sha256Prefix(t, ledgerV1); previous != "1.0.0 ("+v1+")" {
			t.Errorf("previous cell %q, want 1.0.0 (%s)", previous, v1)
		}
		// Two builds may carry one version: the notice names the build.
		if !strings.Contains(notice, "rolled back to 1.0.0 (SHA-256 ") {
			t.Errorf("notice after roll back %q", notice)
		}
		// Uploading the bytes that serve changes nothing, and says so.
		run(t, signIn(operator), chromedp.WaitVisible("#plugins", chromedp.ByID),
			chromedp.SendKeys("#name", "ledger", chromedp.ByID), chromedp.SetUploadFiles("#module", []string{ledgerV1}, chromedp.ByID),
			chromedp.Submit("#upload", chromedp.ByID),
			// The signed-in page has no notice: the one that shows is the answer's.
			chromedp.WaitVisible("#notice", chromedp.ByID), text("#notice", &notice))
		if notice != "Plugin ledger 1.0.0 is the version serving already; nothing changed" {
			t.Errorf("notice after uploading the version that serves: %q", notice)
		}
		// The API agrees: the console wrote through it.
		for _, it := range apiCall(t, base, operator, "GET", "/v1/admin/plugins", nil)["items"].([]any) {
			if m := it.(map[string]any); m["name"] == "ledger" && m["version"] != "1.0.0" {
				t.Errorf("the API lists ledger %v after the roll back", m["version"])
			}
		}
	})

	t.Run("TenantAdminReplaysDeadLetter", func(t *testing.T) {
		webhookConfig(t, base, acmeAdmin, rc.url("/dead"), "note.dead_letter")
		emit(t, base, acmeAdmin, "contact-dl", "note", "dead_letter")
		// The receiver fails the first request; one attempt makes it a dead letter.
		var id string
		waitFor(t, "a dead letter", func() bool {
			items := apiCall(t, base, acmeAdmin, "GET", "/v1/admin/webhooks/dead-letters", nil)["items"].([]any)
			if len(items) == 1 {
				id = items[0].(map[string]any)["delivery_id"].(string)
			}
			return id != ""
		})
		if got := rc.arrivals(id); got != 1 {
			t.Fatalf("%d arrivals of %s before the replay, want 1", got, id)
		}
		row := `tr[data-delivery="` + id + `"]`
		var notice string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/dead-letters"), chromedp.WaitVisible(row, chromedp.ByQuery), shot("dead-letters-one"),
			chromedp.Click(row+` button.replay`, chromedp.ByQuery), chromedp.WaitVisible("#notice", chromedp.ByID), text("#notice", &notice), shot("dead-letters-replayed"))
		if !strings.Contains(notice, id) {
			t.Errorf("notice after replay %q", notice)
		}
		waitFor(t, "the replayed attempt at the receiver", func() bool { return rc.arrivals(id) == 2 })

		// The deliveries view lists it; its page shows both attempts as a
		// timeline, read from the audit facts.
		waitFor(t, "the replayed attempt's audit fact", func() bool {
			return len(apiCall(t, base, acmeAdmin, "GET", "/v1/admin/webhooks/deliveries/"+id, nil)["attempts"].([]any)) == 2
		})
		var attempts []string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/deliveries?status=sent"), chromedp.WaitVisible(row, chromedp.ByQuery), shot("deliveries"),
			chromedp.Click(row+" a", chromedp.ByQuery), chromedp.WaitVisible(`#attempts li[data-attempt]`, chromedp.ByQuery), shot("delivery-timeline"),
			chromedp.Evaluate(`[...document.querySelectorAll("#attempts li")].map(li => li.textContent.trim())`, &attempts))
		if len(attempts) != 2 || !strings.Contains(attempts[0], "attempt 1: 500") || !strings.Contains(attempts[1], "attempt 1: 200") ||
			!strings.Contains(attempts[0], "MAX_RETRIES_EXCEEDED") || !strings.Contains(attempts[1], " ms") {
			t.Errorf("the delivery's timeline %q, want a 500 with its error code then, after the replay, a 200 with its response time", attempts)
		}
	})

	t.Run("LiveKeySeesDeliveriesButCannotWrite", func(t *testing.T) {
		// The deliveries of the tenant so far, as its admin reads them.
		want := map[string]bool{}
		for _, it := range apiCall(t, base, acmeAdmin, "GET", "/v1/admin/webhooks/deliveries?limit=200", nil)["items"].([]any) {
			want[it.(map[string]any)["delivery_id"].(string)] = true
		}
		if len(want) == 0 {
			t.Fatal("no deliveries to see")
		}
		var listed []string
		var help, buttons string
		var status float64
		run(t, signIn(acmeLive), chromedp.Navigate(base+"/console/deliveries"), chromedp.WaitVisible("#deliveries tr[data-delivery]", chromedp.ByQuery),
			chromedp.Evaluate(`[...document.querySelectorAll("#deliveries tr[data-delivery]")].map(tr => tr.dataset.delivery)`, &listed), shot("portal-deliveries"),
			chromedp.Navigate(base+"/console/webhooks"), chromedp.WaitVisible("#signature-help", chromedp.ByID), text("#signature-help", &help),
			shot("portal-signatures"),
			chromedp.Evaluate(`[...document.querySelectorAll("button")].map(b => b.textContent).join("|")`, &buttons),
			// A write the page offers no button for, sent with the session's CSRF token.
			chromedp.Evaluate(`fetch("/console/dead-letters/`+firstKey(want)+`/replay", {method: "POST",
				headers: {"X-CSRF-Token": document.querySelector('input[name="csrf"]').value}}).then(r => r.status)`, &status,
				func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
		if len(listed) != len(want) {
			t.Errorf("the live key lists %d deliveries, the tenant has %d", len(listed), len(want))
		}
		for _, id := range listed {
			if !want[id] {
				t.Errorf("the live key lists %s, not a delivery of its tenant", id)
			}
		}
		if !strings.Contains(help, "X-Svc-Signature") || !strings.Contains(help, "webhookverify") || !strings.Contains(help, "openssl") {
			t.Errorf("signature help %q", help)
		}
		if strings.Contains(buttons, "Replay") || strings.Contains(buttons, "Rotate") || strings.Contains(buttons, "Resume") {
			t.Errorf("the live key's pages offer %q", buttons)
		}
		if status != http.StatusForbidden {
			t.Errorf("the live key's replay through the console answered %v, want 403", status)
		}
	})

	t.Run("TenantAdminReplaysAllDeadLettersAfterConfirming", func(t *testing.T) {
		rc.setDown(true)
		cfg, _ := webhookConfig(t, base, acmeAdmin, rc.url("/down"), "note.down")
		for i := range 3 {
			emit(t, base, acmeAdmin, fmt.Sprintf("contact-down-%d", i), "note", "down")
		}
		var ids []string
		waitFor(t, "three dead letters", func() bool {
			ids = ids[:0]
			for _, it := range apiCall(t, base, acmeAdmin, "GET", "/v1/admin/webhooks/dead-letters?config_id="+cfg, nil)["items"].([]any) {
				ids = append(ids, it.(map[string]any)["delivery_id"].(string))
			}
			return len(ids) == 3
		})
		rc.setDown(false)
		var count, notice string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/dead-letters"), chromedp.WaitVisible("#replay-all", chromedp.ByID),
			chromedp.Click("#replay-all", chromedp.ByID), chromedp.WaitVisible("#confirm-replay-all", chromedp.ByID),
			text("#replay-count", &count), shot("dead-letters-replay-all"),
			chromedp.Click("#confirm-replay-all", chromedp.ByID), chromedp.WaitVisible("#notice", chromedp.ByID), text("#notice", &notice))
		// Dead letters of earlier subtests may be replayed too; these three must be.
		if !strings.Contains(count, "Replay") || !strings.Contains(notice, "dead letters replayed") {
			t.Errorf("confirmation %q, notice %q", count, notice)
		}
		for _, id := range ids {
			waitFor(t, "the replayed delivery "+id+" at the receiver", func() bool { return rc.arrivals(id) == 2 })
			waitFor(t, "the delivery "+id+" sent", func() bool {
				return apiCall(t, base, acmeAdmin, "GET", "/v1/admin/webhooks/deliveries/"+id, nil)["status"] == "sent"
			})
		}
	})

	t.Run("TenantAdminRotatesSecret", func(t *testing.T) {
		cfg, old := webhookConfig(t, base, acmeAdmin, rc.url("/rotate"), "note.rotated")
		row := `tr[data-config="` + cfg + `"]`
		var secret, after, reloaded, reloadedPage string
		var sendable bool
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/webhooks"), chromedp.WaitVisible(row, chromedp.ByQuery), shot("webhooks-admin"),
			// The browser will not send the form until its box is ticked.
			chromedp.Evaluate(`document.querySelector('`+row+` button.rotate').form.checkValidity()`, &sendable),
			chromedp.Click(row+` input.confirm-rotate`, chromedp.ByQuery),
			chromedp.Click(row+` button.rotate`, chromedp.ByQuery), chromedp.WaitVisible("#secret", chromedp.ByID), text("#secret", &secret), shot("secret-rotated"),
			// A reload is a GET of the reveal page, not the POST again: it
			// shows the secret no more.
			chromedp.Reload(), chromedp.WaitVisible("#problem", chromedp.ByID), text("#problem", &reloaded), chromedp.OuterHTML("html", &reloadedPage, chromedp.ByQuery),
			chromedp.Navigate(base+"/console/webhooks"), chromedp.WaitVisible(row, chromedp.ByQuery), chromedp.OuterHTML("html", &after, chromedp.ByQuery))
		if sendable {
			t.Error("the rotate form could be sent without its confirmation box ticked")
		}
		if !strings.Contains(reloaded, "410") || strings.Contains(reloadedPage, secret) {
			t.Errorf("the secret's page reloaded says %q", reloaded)
		}
		if !strings.HasPrefix(secret, "whsec_") || secret == old {
			t.Errorf("rotated secret %q (old %q): want a new whsec_ secret", secret, old)
		}
		if strings.Contains(after, secret) {
			t.Error("the webhooks view shows the new secret again")
		}
	})

	t.Run("TenantAdminManagesWebhookConfig", func(t *testing.T) {
		const name = "managed in the browser"
		var secret string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/webhooks"), chromedp.Click("#new-webhook", chromedp.ByID),
			chromedp.WaitVisible("#webhook-form", chromedp.ByID),
			chromedp.SendKeys("#name", name, chromedp.ByID), chromedp.SendKeys("#url", rc.url("/managed"), chromedp.ByID),
			chromedp.SendKeys("#triggers", "note.managed, note.other", chromedp.ByID), chromedp.SendKeys("#max_attempts", "2", chromedp.ByID),
			shot("webhook-new"), chromedp.Click("#save-webhook", chromedp.ByID),
			chromedp.WaitVisible("#secret", chromedp.ByID), text("#secret", &secret), shot("webhook-created"))
		if !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("new webhook's secret %q", secret)
		}
		var id string
		for _, it := range apiCall(t, base, acmeAdmin, "GET", "/v1/configs?type=webhook&limit=200", nil)["items"].([]any) {
			if m := it.(map[string]any); m["name"] == name {
				id = m["id"].(string)
			}
		}
		if id == "" {
			t.Fatal("the form created no config")
		}
		row := `tr[data-config="` + id + `"]`
		var version, paused, resumed, archived string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/webhooks"), chromedp.WaitVisible(row, chromedp.ByQuery),
			chromedp.Click(row+` a.edit`, chromedp.ByQuery), chromedp.WaitVisible("#webhook-form", chromedp.ByID),
			chromedp.SetValue("#url", rc.url("/managed-v2"), chromedp.ByID), shot("webhook-edit"),
			chromedp.Click("#save-webhook", chromedp.ByID), chromedp.WaitVisible("#notice", chromedp.ByID),
			text(row+" td:nth-child(3)", &version),
			chromedp.Click(row+` button.pause`, chromedp.ByQuery), chromedp.WaitVisible(row+` button.resume`, chromedp.ByQuery),
			text(row+" td.state", &paused), shot("webhook-paused"),
			chromedp.Click(row+` button.resume`, chromedp.ByQuery), chromedp.WaitVisible(row+` button.pause`, chromedp.ByQuery),
			text(row+" td.state", &resumed),
			chromedp.Click(row+` a.archive`, chromedp.ByQuery), chromedp.WaitVisible("#confirm-archive", chromedp.ByID), shot("webhook-archive"),
			chromedp.Click("#confirm-archive", chromedp.ByID), chromedp.WaitVisible("#notice", chromedp.ByID),
			text(row+" td.state", &archived))
		if version != "2" || paused != "active, paused" || resumed != "active" || archived != "archived" {
			t.Errorf("version %q, states %q, %q, %q: want 2, active, paused, active, archived", version, paused, resumed, archived)
		}
		cfg := apiCall(t, base, acmeAdmin, "GET", "/v1/configs/"+id, nil)
		if cfg["version"] != float64(2) || cfg["status"] != "archived" || cfg["settings"].(map[string]any)["url"] != rc.url("/managed-v2") {
			t.Errorf("config after the browser: %v", cfg)
		}
	})

	t.Run("TenantAdminChartsProjection", func(t *testing.T) {
		hour0 := time.Date(2024, 1, 15, 10, 0, 0, 0, time.UTC).UnixMilli()
		cfg := apiCall(t, base, acmeAdmin, "POST", "/v1/configs", map[string]any{"type": "projection", "name": "calls", "settings": map[string]any{
			"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour", "groupBy": []string{"data.channel"},
			"aggregations": []map[string]any{{"field": "count", "function": "count"}, {"field": "data.duration", "function": "sum"}},
			"materialize":  true, "storageVersion": 2}})["id"].(string)
		apiCall(t, base, acmeAdmin, "POST", "/v1/entities", map[string]any{"type": "contact", "id": "chart-c", "status": "active", "name": "c"})
		for i, f := range []struct {
			at       int64
			channel  string
			duration float64
		}{{-50, "phone", 5}, {5, "phone", 30}, {20, "video", 60}, {30, "phone", 20}, {65, "phone", 10.5}, {130, "video", 7}} {
			apiCall(t, base, acmeAdmin, "POST", "/v1/facts", map[string]any{"entity_id": "chart-c", "type": "call", "timestamp": hour0 + f.at*60_000,
				"data": map[string]any{"channel": f.channel, "duration": f.duration, "n": i}})
		}
		// The API's answer for the range the page will ask for, once the
		// projection has every fact.
		filters := map[string]any{"from": "2024-01-15T09:00", "to": "2024-01-15T11:00"}
		var want []any
		waitFor(t, "the projection to catch up", func() bool {
			d := apiCall(t, base, acmeAdmin, "POST", "/v1/projections/"+cfg+"/query", map[string]any{"filters": filters})
			want, _ = d["results"].([]any)
			return len(want) == 4 && d["_meta"].(map[string]any)["ready"] == true
		})
		var series string
		var ok bool
		var table [][]string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/projections?id="+cfg+"&from=2024-01-15T09:00&to=2024-01-15T11:00"),
			chromedp.WaitVisible("#chart canvas", chromedp.ByQuery), chromedp.AttributeValue("#chart", "data-series", &series, &ok, chromedp.ByQuery),
			chromedp.Evaluate(`[...document.querySelectorAll("#chart-data tbody tr")].map(tr => [tr.dataset.x, tr.dataset.group, ...[...tr.querySelectorAll("td[data-metric]")].map(td => td.textContent)])`, &table),
			shot("projection-chart"))
		run(t, signIn(acmeAdmin), chartsNarrow(t, base, "/console/projections?id="+cfg+"&from=2024-01-15T09:00&to=2024-01-15T11:00"))
		var plotted struct {
			Groups []string     `json:"groups"`
			Data   [][]*float64 `json:"data"`
		}
		if err := json.Unmarshal([]byte(series), &plotted); err != nil || !ok {
			t.Fatalf("the chart's data-series %q: %v", series, err)
		}
		if len(table) != len(want) {
			t.Fatalf("the chart's table has %d rows, the API answered %d: %v", len(table), len(want), table)
		}
		for i, w := range want {
			row := w.(map[string]any)
			group, _ := json.Marshal(row["group"])
			x := time.Date(2024, 1, 15, 0, 0, 0, 0, time.UTC).UnixMilli() // bucket keys are hours of that day
			var h int
			fmt.Sscanf(row["bucket"].(string), "2024-01-15T%d", &h)
			x += int64(h) * 3_600_000
			// The table holds every number of the API's row, in metric order.
			wantRow := []string{fmt.Sprint(x), string(group), fmt.Sprint(row["count"]), fmt.Sprint(row["duration_sum"])}
			if fmt.Sprint(table[i]) != fmt.Sprint(wantRow) {
				t.Errorf("table row %d %v, API row %v", i, table[i], wantRow)
			}
			// The chart plots the count of that bucket and group.
			gi, xi := slices.Index(plotted.Groups, string(group)), slices.IndexFunc(plotted.Data[0], func(v *float64) bool { return v != nil && int64(*v)*1000 == x })
			if gi < 0 || xi < 0 || plotted.Data[1+gi][xi] == nil || *plotted.Data[1+gi][xi] != row["count"].(float64) {
				t.Errorf("the chart has no point %v for %s at %s: %s", row["count"], group, row["bucket"], series)
			}
		}
	})

	// A group value thousands of characters long wraps in the table and
	// the legend instead of making the page tens of thousands of pixels
	// wide; so does a key's name of the longest kind.
	t.Run("LongGroupKeepsThePageWidth", func(t *testing.T) {
		apiCall(t, base, acmeAdmin, "POST", "/v1/admin/keys", map[string]any{"mode": "test", "name": strings.Repeat("k", 200)})
		var keysWidths []float64
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible("#keys", chromedp.ByID),
			chromedp.Evaluate(`[document.documentElement.scrollWidth, window.innerWidth]`, &keysWidths))
		if len(keysWidths) != 2 || keysWidths[0] > keysWidths[1] {
			t.Errorf("keys page %v px wide in a window of %v", keysWidths[0], keysWidths[1])
		}
		cfg := apiCall(t, base, acmeAdmin, "POST", "/v1/configs", map[string]any{"type": "projection", "name": "notes", "settings": map[string]any{
			"source": "contact", "factTypes": []string{"note"}, "timeWindow": "day", "groupBy": []string{"data.text"},
			"aggregations": []map[string]any{{"field": "count", "function": "count"}}, "materialize": true, "storageVersion": 2}})["id"].(string)
		apiCall(t, base, acmeAdmin, "POST", "/v1/entities", map[string]any{"type": "contact", "id": "wide-c", "status": "active", "name": "w"})
		apiCall(t, base, acmeAdmin, "POST", "/v1/facts", map[string]any{"entity_id": "wide-c", "type": "note",
			"timestamp": time.Date(2024, 2, 1, 12, 0, 0, 0, time.UTC).UnixMilli(), "data": map[string]any{"text": strings.Repeat("w", 3000)}})
		waitFor(t, "the projection to count the note", func() bool {
			d := apiCall(t, base, acmeAdmin, "POST", "/v1/projections/"+cfg+"/query", map[string]any{"filters": map[string]any{"from": "2024-02-01", "to": "2024-02-02"}})
			rows, _ := d["results"].([]any)
			return len(rows) == 1 && d["_meta"].(map[string]any)["ready"] == true
		})
		var widths []float64
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/projections?id="+cfg+"&from=2024-02-01T00:00&to=2024-02-02T00:00"),
			chromedp.WaitVisible("#chart-data tbody tr[data-group]", chromedp.ByQuery),
			chromedp.Evaluate(`[document.documentElement.scrollWidth, window.innerWidth]`, &widths), shot("projection-long-group"))
		if len(widths) != 2 || widths[0] > widths[1] {
			t.Errorf("page %v px wide in a window of %v", widths[0], widths[1])
		}
	})

	t.Run("TenantAdminChartsDeliveryLatency", func(t *testing.T) {
		// Attempts of a past window, appended as the worker records them.
		from := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
		var items []store.Append
		for i := 0; i < 40; i++ {
			at := from.Add(time.Duration(i*i%360) * time.Minute).UnixMilli()
			data := fmt.Sprintf(`{"delivery_id":"del_chart_%d","success":%t,"attempt":1,"response_time_ms":%d.25}`, i, i%4 != 0, 17+i*i*7%900)
			items = append(items, store.Append{Fact: store.Fact{ID: fmt.Sprintf("fct_chart_sent_%02d", i), TenantID: "acme", Type: "webhook",
				Subtype: "sent", Timestamp: at, Data: []byte(data), CreatedAt: at}})
		}
		if _, err := a.Store.AppendFacts(context.Background(), items); err != nil {
			t.Fatal(err)
		}
		q := fmt.Sprintf("from=%d&to=%d&buckets=6", from.UnixMilli(), from.Add(6*time.Hour).UnixMilli())
		want := apiCall(t, base, acmeAdmin, "GET", "/v1/webhooks/deliveries/stats?"+q, nil)["buckets"].([]any)
		cell := func(v any) string {
			if f, ok := v.(float64); ok {
				return strconv.FormatFloat(f, 'f', -1, 64)
			}
			return ""
		}
		var table [][]string
		var ratios []string
		var plotted, ratioPlotted string
		var ok bool
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/delivery-stats?from=2024-03-01T00:00&to=2024-03-01T06:00&buckets=6"),
			chromedp.WaitVisible("#latency-chart canvas", chromedp.ByQuery), chromedp.WaitVisible("#ratio-chart canvas", chromedp.ByQuery),
			chromedp.AttributeValue("#latency-chart", "data-plotted", &plotted, &ok, chromedp.ByQuery),
			chromedp.AttributeValue("#ratio-chart", "data-plotted", &ratioPlotted, &ok, chromedp.ByQuery),
			// A cell's exact value, which the ratio keeps in data-value.
			chromedp.Evaluate(`[...document.querySelectorAll("#stats-data tbody tr")].map(tr => [tr.dataset.x, ...[...tr.querySelectorAll("td[data-series]")].map(td => td.dataset.value ?? td.textContent)])`, &table),
			chromedp.Evaluate(`[...document.querySelectorAll("#stats-data td[data-series=success_ratio]")].map(td => td.textContent)`, &ratios),
			shot("delivery-stats"))
		if len(table) != len(want) || len(want) != 6 {
			t.Fatalf("the page's table has %d rows, the API answered %d: %v", len(table), len(want), table)
		}
		var chart struct {
			Series []string     `json:"series"`
			Data   [][]*float64 `json:"data"`
		}
		if err := json.Unmarshal([]byte(plotted), &chart); err != nil || !ok || len(chart.Data) != 3 {
			t.Fatalf("the latency chart's data-plotted %q: %v", plotted, err)
		}
		var ratioChart struct {
			Data [][]*float64 `json:"data"`
		}
		if err := json.Unmarshal([]byte(ratioPlotted), &ratioChart); err != nil || len(ratioChart.Data) != 2 || len(ratios) != len(want) {
			t.Fatalf("the ratio chart's data-plotted %q, ratio cells %q: %v", ratioPlotted, ratios, err)
		}
		attempts := 0
		for i, w := range want {
			b := w.(map[string]any)
			// People read a rounded percentage; the chart plots the API's ratio.
			if r, isNum := b["success_ratio"].(float64); isNum {
				if got := ratioChart.Data[1][i]; got == nil || *got != r {
					t.Errorf("the ratio chart plots %v in bucket %d, the API says %v", got, i, r)
				}
				if want := strconv.FormatFloat(math.Round(r*1000)/10, 'f', 1, 64) + " %"; ratios[i] != want {
					t.Errorf("ratio cell %d reads %q, want %q (%v)", i, ratios[i], want, r)
				}
			}
			attempts += int(b["attempts"].(float64))
			wantRow := []string{cell(b["from"]), cell(b["attempts"]), cell(b["succeeded"]), cell(b["success_ratio"]), cell(b["p50_ms"]), cell(b["p99_ms"])}
			if fmt.Sprint(table[i]) != fmt.Sprint(wantRow) {
				t.Errorf("table row %d %v, API bucket %v", i, table[i], wantRow)
			}
			for j, k := range []string{"p50_ms", "p99_ms"} {
				got := chart.Data[1+j][i]
				if (got == nil) != (b[k] == nil) || got != nil && *got != b[k].(float64) || *chart.Data[0][i]*1000 != b["from"].(float64) {
					t.Errorf("the chart plots %s %v at %v, the API says %v at %v", k, got, *chart.Data[0][i], b[k], b["from"])
				}
			}
		}
		if attempts != 40 {
			t.Errorf("the API counts %d attempts in the window, want 40", attempts)
		}
		// Across several buckets the time axis spans them; one bucket gets
		// an hour either side, not uPlot's default of years.
		for _, tc := range []struct {
			buckets  int
			from, to float64
		}{{6, float64(from.Unix()), float64(from.Add(5 * time.Hour).Unix())}, {1, float64(from.Unix() - 3600), float64(from.Unix() + 3600)}} {
			var xrange string
			run(t, signIn(acmeAdmin), chromedp.Navigate(fmt.Sprintf("%s/console/delivery-stats?from=2024-03-01T00:00&to=2024-03-01T06:00&buckets=%d", base, tc.buckets)),
				chromedp.WaitVisible("#latency-chart canvas", chromedp.ByQuery),
				chromedp.AttributeValue("#latency-chart", "data-xrange", &xrange, &ok, chromedp.ByQuery))
			var r []float64
			if err := json.Unmarshal([]byte(xrange), &r); err != nil || !ok || len(r) != 2 || r[0] != tc.from || r[1] != tc.to {
				t.Errorf("%d buckets: the time axis runs %q, want [%v, %v]", tc.buckets, xrange, tc.from, tc.to)
			}
		}
	})

	t.Run("OperatorSeesLagChartAndEveryTenantsProjections", func(t *testing.T) {
		var consumers, columns []string
		var plotted, problem, nav string
		var ok bool
		run(t, signIn(operator), chromedp.Navigate(base+"/console/stream"), chromedp.WaitVisible("#lag-chart canvas", chromedp.ByQuery),
			chromedp.AttributeValue("#lag-chart", "data-plotted", &plotted, &ok, chromedp.ByQuery),
			chromedp.Evaluate(`[...document.querySelectorAll("#consumers tbody tr[data-consumer]")].map(tr => tr.dataset.consumer)`, &consumers),
			chromedp.Evaluate(`[...document.querySelectorAll("#lag-data thead th")].slice(2).map(th => th.textContent)`, &columns),
			shot("stream-lag"))
		var chart struct {
			Series []string     `json:"series"`
			Data   [][]*float64 `json:"data"`
		}
		if err := json.Unmarshal([]byte(plotted), &chart); err != nil || !ok || len(chart.Data) != 1+len(columns) || len(chart.Data[0]) == 0 {
			t.Fatalf("the lag chart's data-plotted %q: %v", plotted, err)
		}
		// Samples taken since the start name consumers the table lists.
		for _, c := range columns {
			if !slices.Contains(consumers, c) {
				t.Errorf("the lag chart has consumer %q, the table %v", c, consumers)
			}
		}
		if fmt.Sprint(chart.Series) != fmt.Sprint(columns) {
			t.Errorf("the chart plots %v, the table has columns %v", chart.Series, columns)
		}

		want := apiCall(t, base, operator, "GET", "/v1/admin/projections", nil)["items"].([]any)
		var rows [][]string
		run(t, signIn(operator), chromedp.Navigate(base+"/console/all-projections"),
			chromedp.WaitVisible(`#all-projections tr[data-tenant="acme"]`, chromedp.ByQuery),
			chromedp.Evaluate(`[...document.querySelectorAll("#all-projections tbody tr")].map(tr => [tr.dataset.tenant, tr.dataset.projection, tr.querySelector(".status").textContent, tr.querySelector(".ready").textContent])`, &rows),
			shot("all-projections"))
		if len(rows) != len(want) || len(want) == 0 {
			t.Fatalf("the page lists %v, the API %v", rows, want)
		}
		for i, w := range want {
			m := w.(map[string]any)
			if r := rows[i]; r[0] != m["tenant"] || r[1] != m["config_id"] || r[2] != m["status"] || r[3] != fmt.Sprint(m["ready"]) {
				t.Errorf("row %d %v, API %v", i, r, m)
			}
		}
		run(t, signIn(acmeAdmin), text("nav", &nav), chromedp.Navigate(base+"/console/all-projections"),
			chromedp.WaitVisible("#problem", chromedp.ByID), text("#problem", &problem))
		if strings.Contains(nav, "All projections") || !strings.Contains(problem, "403") {
			t.Errorf("a tenant admin's nav %q, on /console/all-projections %q", nav, problem)
		}
	})

	t.Run("TenantAdminCreatesAndRevokesKey", func(t *testing.T) {
		var created, notice string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible("#keys", chromedp.ByID),
			chromedp.SendKeys("#key-name", "browser", chromedp.ByID), chromedp.SetValue("#mode", "test", chromedp.ByID),
			chromedp.Submit("#create-key", chromedp.ByID), chromedp.WaitVisible("#new-key", chromedp.ByID), text("#new-key", &created), shot("key-created"),
			chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(`#keys tr td:nth-child(2)`, chromedp.ByQuery), shot("keys"),
			chromedp.ActionFunc(func(ctx context.Context) error {
				// Revoke the row named browser, its box ticked.
				if err := chromedp.Click(`//tr[td[2][text()="browser"]]//input[@class="confirm-revoke"]`, chromedp.BySearch).Do(ctx); err != nil {
					return err
				}
				return chromedp.Click(`//tr[td[2][text()="browser"]]//button[@class="revoke"]`, chromedp.BySearch).Do(ctx)
			}),
			chromedp.WaitVisible("#notice", chromedp.ByID), text("#notice", &notice))
		if !strings.HasPrefix(created, "fl_test_") || !strings.Contains(notice, "revoked") {
			t.Fatalf("created %q, notice %q", created, notice)
		}
		req, _ := http.NewRequest("GET", base+"/v1/configs", nil)
		req.Header.Set("X-API-Key", created)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the key revoked in the console answers %d on the API, want 401", resp.StatusCode)
		}
	})

	// A form is sent once: a second submit while the first is on its way
	// is dropped (a double click made two keys), and the page says why;
	// past the server's deadline it is sent again (a page stopped during
	// a stall never sent again). A page that showed a
	// secret forgets it as it is left, so the back/forward cache cannot
	// show it again, and asks the server again when restored from it.
	t.Run("FormsAreSentOnceAndSecretsLeaveWithThePage", func(t *testing.T) {
		var prevented []bool
		var notice string
		var created, after, once, title string
		run(t, signIn(acmeAdmin), chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible("#create-key", chromedp.ByID),
			chromedp.Evaluate(`(() => {
				const f = document.getElementById("create-key");
				const press = () => { const e = new Event("submit", {cancelable: true, bubbles: true}); f.dispatchEvent(e); return e.defaultPrevented; };
				const out = [press(), press()];
				const now = Date.now;
				Date.now = () => now() + 36000; // past the server's 30 s deadline
				out.push(press(), press());
				Date.now = now;
				return out;
			})()`, &prevented),
			chromedp.Text("#net-error", &notice, chromedp.ByID),
			chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible("#create-key", chromedp.ByID),
			chromedp.SendKeys("#key-name", "once", chromedp.ByID),
			chromedp.Submit("#create-key", chromedp.ByID), chromedp.WaitVisible("#new-key", chromedp.ByID), text("#new-key", &created),
			chromedp.Title(&title),
			chromedp.Evaluate(`document.body.dataset.once || ""`, &once),
			chromedp.Evaluate(`window.dispatchEvent(new PageTransitionEvent("pagehide")); document.getElementById("new-key").textContent`, &after))
		if fmt.Sprint(prevented) != "[false true false true]" {
			t.Errorf("submit events prevented %v, want the second, and after 36 s the first sends again", prevented)
		}
		if !strings.Contains(notice, "This form was sent and its answer has not come yet") {
			t.Errorf("a press dropped while the answer is awaited says %q", notice)
		}
		if !strings.HasPrefix(created, "fl_") || after != "" || once != "1" || title != "Factline console: New API key" {
			t.Errorf("key %q, after leaving %q, once %q, title %q", created, after, once, title)
		}
	})

	// Every view loads without a script error or an error Chromium logs
	// about the page (a pattern it cannot compile, a CSP refusal), for the
	// operator and for a tenant admin.
	t.Run("EveryViewWithoutErrors", func(t *testing.T) {
		views := []string{"/console/plugins", "/console/domain", "/console/stream", "/console/all-projections", "/console/projections",
			"/console/dead-letters", "/console/keys", "/console/webhooks", "/console/webhooks/new", "/console/deliveries", "/console/delivery-stats"}
		for _, key := range []string{operator, acmeAdmin} {
			var mu sync.Mutex
			var errs []string
			note := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, fmt.Sprintf(format, args...))
			}
			var visited []string
			visit := chromedp.ActionFunc(func(ctx context.Context) error {
				chromedp.ListenTarget(ctx, func(ev any) {
					switch e := ev.(type) {
					case *runtime.EventExceptionThrown:
						note("exception in %s: %s", e.ExceptionDetails.URL, e.ExceptionDetails.Error())
					case *runtime.EventConsoleAPICalled:
						if e.Type == runtime.APITypeError {
							note("console.error: %v", e.Args)
						}
					case *cdplog.EventEntryAdded:
						// A view refused to this key answers 403, which
						// Chromium logs from its network source.
						if e.Entry.Level == cdplog.LevelError && e.Entry.Source != cdplog.SourceNetwork {
							note("%s: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL)
						}
					}
				})
				if err := cdplog.Enable().Do(ctx); err != nil {
					return err
				}
				for _, v := range views {
					var status string
					if err := chromedp.Run(ctx, chromedp.Navigate(base+v), chromedp.WaitReady("main", chromedp.ByQuery),
						chromedp.Evaluate(`document.getElementById("problem") ? document.getElementById("problem").textContent : ""`, &status),
						// Chromium compiles a pattern when it first checks a
						// value against it, and logs one it cannot compile.
						chromedp.Evaluate(`document.querySelectorAll("input[pattern]").forEach(i => { i.value = "a"; i.checkValidity(); }); true`, nil)); err != nil {
						return err
					}
					if status == "" {
						visited = append(visited, v)
					}
				}
				// Late errors (deferred scripts, charts) reach the listener
				// before a round trip through the page returns.
				return chromedp.Evaluate(`new Promise(r => setTimeout(() => r(true), 0))`, nil,
					func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }).Do(ctx)
			})
			run(t, signIn(key), visit)
			mu.Lock()
			if len(errs) > 0 {
				t.Errorf("errors while opening the views: %s", strings.Join(errs, "\n"))
			}
			mu.Unlock()
			if key == operator && len(visited) < 5 {
				t.Errorf("the operator opened only %v without a problem", visited)
			}
		}
	})

	t.Run("SignOut", func(t *testing.T) {
		var loc string
		run(t, signIn(acmeAdmin), chromedp.Click("#sign-out", chromedp.ByID), chromedp.WaitVisible("#key", chromedp.ByID),
			chromedp.Navigate(base+"/console/webhooks"), chromedp.WaitVisible("#key", chromedp.ByID), chromedp.Location(&loc))
		if u, _ := url.Parse(loc); u == nil || u.Path != "/console/sign-in" {
			t.Errorf("after sign out, /console/webhooks landed on %q", loc)
		}
	})

	// Back after signing out asks the server again rather than showing
	// the tenant's page from the back/forward cache (a shared machine's
	// next user saw every key of the tenant).
	t.Run("SignOutThenBack", func(t *testing.T) {
		var loc string
		run(t, signIn(acmeAdmin), chromedp.Click("#nav-keys", chromedp.ByID), chromedp.WaitVisible("#create-key", chromedp.ByID),
			chromedp.Click("#sign-out", chromedp.ByID), chromedp.WaitVisible("#key", chromedp.ByID),
			chromedp.NavigateBack(), chromedp.WaitVisible("#key", chromedp.ByID), chromedp.Location(&loc))
		if u, _ := url.Parse(loc); u == nil || u.Path != "/console/sign-in" {
			t.Errorf("Back after sign out showed %q", loc)
		}
	})
}

// firstKey is the smallest key of a set.
func firstKey(m map[string]bool) string {
	keys := slices.Sorted(maps.Keys(m))
	return keys[0]
}

// ledgerVersions builds the test ledger guest as 1.0.0 and 2.0.0 and
// precompiles both into a compilation cache for the app (a race build of
// the runtime compiles them fifteen times slower).
func ledgerVersions(t *testing.T) (v1, v2, cacheDir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	paths, err := wasmtest.Build(ctx, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	cacheDir = t.TempDir()
	if err := wasmtest.Precompile(ctx, cacheDir, true, paths...); err != nil {
		t.Fatal(err)
	}
	return paths[0], paths[1], cacheDir
}

// receiver is a loopback HTTPS endpoint that fails the first request of
// each path and accepts the rest, counting arrivals by delivery id.
type receiver struct {
	down bool
	srv  *httptest.Server
	mu   sync.Mutex
	ids  map[string]int
	hit  map[string]bool
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{ids: map[string]int{}, hit: map[string]bool{}}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.ids[r.Header.Get("X-Svc-Delivery-Id")]++
		first := !rc.hit[r.URL.Path]
		rc.hit[r.URL.Path] = true
		down := rc.down && strings.HasPrefix(r.URL.Path, "/down")
		rc.mu.Unlock()
		if first || down {
			http.Error(w, "not yet", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// setDown makes paths under /down answer 500 (or no longer).
func (rc *receiver) setDown(down bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.down = down
}

func (rc *receiver) url(path string) string { return rc.srv.URL + path }

func (rc *receiver) arrivals(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.ids[id]
}

func (rc *receiver) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(rc.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// apiCall calls the API over HTTP and returns the envelope's data.
func apiCall(t *testing.T, base, key, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data map[string]any `json:"data"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return out.Data
}

// webhookConfig creates a secret and a one-attempt webhook config of the
// key's tenant; it returns the config id and the secret.
func webhookConfig(t *testing.T, base, key, target, trigger string) (id, secret string) {
	t.Helper()
	sec := apiCall(t, base, key, "POST", "/v1/admin/webhooks/secrets", nil)
	cfg := apiCall(t, base, key, "POST", "/v1/configs", map[string]any{"type": "webhook", "name": trigger,
		"settings": map[string]any{"url": target, "secret_ref": sec["secret_ref"], "triggers": []string{trigger},
			"retry": map[string]any{"enabled": false}}})
	return cfg["id"].(string), sec["secret"].(string)
}

// emit records a fact of a new contact.
func emit(t *testing.T, base, key, contact, typ, subtype string) {
	t.Helper()
	apiCall(t, base, key, "POST", "/v1/entities", map[string]any{"type": "contact", "id": contact, "status": "active", "name": contact})
	apiCall(t, base, key, "POST", "/v1/facts", map[string]any{"entity_id": contact, "type": typ, "subtype": subtype})
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, time.Minute, what, cond)
}

func writeFile(t *testing.T, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sha256Prefix is the first 12 hex digits of a file's SHA-256, as the
// plugins view shows digests.
func sha256Prefix(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}
