package console_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/testutil"
)

// chromeTabs starts a headless Chromium for one test and returns run,
// which does the actions in a fresh tab with no cookies, within a minute.
func chromeTabs(t *testing.T) func(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(testutil.Chromium(t)),
		chromedp.NoSandbox, chromedp.Flag("headless", true), chromedp.WindowSize(1280, 800))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Run(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return func(t *testing.T, actions ...chromedp.Action) {
		t.Helper()
		tab, cancel := chromedp.NewContext(browser)
		defer cancel()
		tab, cancelT := context.WithTimeout(tab, time.Minute)
		defer cancelT()
		if err := chromedp.Run(tab, append([]chromedp.Action{network.ClearBrowserCookies()}, actions...)...); err != nil {
			var loc, body string
			dctx, cancelD := context.WithTimeout(context.WithoutCancel(tab), 5*time.Second)
			defer cancelD()
			_ = chromedp.Run(dctx, chromedp.Location(&loc), chromedp.Text("body", &body, chromedp.ByQuery))
			t.Fatalf("%v (page %s: %.400s)", err, loc, body)
		}
	}
}

// browserSignIn signs a key in through the sign-in form.
func browserSignIn(base, key string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Navigate(base + "/console/sign-in"),
		chromedp.SendKeys("#key", key, chromedp.ByID),
		chromedp.Click("#sign-in", chromedp.ByID),
		chromedp.WaitVisible("#tenant", chromedp.ByID),
	}
}

// Stored data cannot widen a page, and every view fits a phone's 375 px:
// a long unbroken webhook name, key name or manifest description wraps,
// and tables scroll inside their own box; the domain model's tables keep
// readable columns, and a refused manifest's problems sit beside it.
func TestBrowserPagesFitTheViewport(t *testing.T) {
	a := setup(t, app.Config{Addr: "127.0.0.1:0"})
	base := serve(t, a)
	run := chromeTabs(t)
	operator, _ := newKey(t, a, "operator", auth.ModeAdmin)
	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	addDeliveries(t, a.Store, "acme", 30)
	long := "idle 20 " + strings.Repeat("W", 190)
	ref := apiDo(t, a, admin, "POST", "/v1/admin/webhooks/secrets", nil)["secret_ref"].(string)
	cfg := apiDo(t, a, admin, "POST", "/v1/configs", map[string]any{"type": "webhook", "name": long,
		"settings": map[string]any{"url": "https://hooks.example.com/" + strings.Repeat("p", 150), "secret_ref": ref, "triggers": []string{"note.long"}}})
	apiDo(t, a, admin, "POST", "/v1/admin/keys", map[string]any{"mode": "live", "name": strings.Repeat("K", 190)})
	desc := strings.Repeat("D", 130)
	manifest := "name: wide\nversion: \"1\"\nentities:\n  claim:\n    ledger: builtin\n    description: " + desc +
		"\n    fields:\n      status: {type: string, required: true, storage: ix_s_1}\n    facts:\n      filed: {description: " + desc + "}\n"
	cookie, csrf := signIn(t, a, operator)
	if resp := do(t, a, "POST", "/console/domain", cookie, url.Values{"csrf": {csrf}, "name": {"wide"}, "manifest": {manifest}}); resp.StatusCode != 303 {
		t.Fatalf("install the domain manifest: %d %s", resp.StatusCode, read(t, resp))
	}

	// fits opens each view at the width and reports those wider than it.
	fits := func(width int64, views ...string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			if err := emulation.SetDeviceMetricsOverride(width, 800, 1, width < 600).Do(ctx); err != nil {
				return err
			}
			for _, v := range views {
				var got []int64
				if err := chromedp.Run(ctx, chromedp.Navigate(base+v), chromedp.WaitReady("main", chromedp.ByQuery),
					chromedp.Evaluate(`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`, &got)); err != nil {
					return err
				}
				if got[0] > got[1] {
					t.Errorf("%s at %d px is %d px wide", v, width, got[0])
				}
				if dir := os.Getenv("FACTLINE_ARTIFACTS"); dir != "" {
					var buf []byte
					if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
						return err
					}
					name := fmt.Sprintf("fit-%d%s.png", width, strings.NewReplacer("/console", "", "/", "-").Replace(v))
					if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	// domain checks the domain view at the width: its tables keep
	// readable columns (at 375 px they were squeezed to the window, a
	// few letters a line) and scroll inside their box when the window is
	// narrower; a refused manifest's problems are right beside its box,
	// in view (they were at the top of the page, above the model).
	domain := func(width int64) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			if err := emulation.SetDeviceMetricsOverride(width, 800, 1, width < 600).Do(ctx); err != nil {
				return err
			}
			// A name (an entity type, a fact type, a field, a stored
			// manifest) is one word: broken over lines, its column was
			// squeezed.
			var tables []struct {
				ID           string
				Names        int
				Broken       []string
				Box, Content float64
			}
			measure := `["entity-types", "domain-layers"].map(id => {
				const t = document.getElementById(id), lines = el => {
					const r = document.createRange();
					r.selectNodeContents(el);
					return new Set([...r.getClientRects()].map(c => Math.round(c.bottom))).size;
				};
				const names = [...t.querySelectorAll("b, code, tbody td:first-child")].filter(e => e.children.length == 0 && /^\S+$/.test(e.textContent));
				return {ID: id, Box: t.parentElement.clientWidth, Content: t.parentElement.scrollWidth, Names: names.length,
					Broken: names.filter(e => lines(e) > 1).map(e => e.textContent)};
			})`
			if err := chromedp.Run(ctx, chromedp.Navigate(base+"/console/domain"), chromedp.WaitReady("#entity-types", chromedp.ByID),
				chromedp.Evaluate(measure, &tables)); err != nil {
				return err
			}
			for _, tb := range tables {
				if tb.Names == 0 {
					t.Errorf("#%s shows no names", tb.ID)
				}
				if len(tb.Broken) > 0 {
					t.Errorf("#%s at %d px breaks names over lines: %q", tb.ID, width, tb.Broken)
				}
				if width < 600 && tb.Content <= tb.Box {
					t.Errorf("#%s at %d px does not scroll in its box (%.0f of %.0f px)", tb.ID, width, tb.Content, tb.Box)
				}
				if width >= 1280 && tb.Content > tb.Box {
					t.Errorf("#%s at %d px scrolls (%.0f of %.0f px), want it to fit", tb.ID, width, tb.Content, tb.Box)
				}
			}
			var at struct {
				ProblemTop, ProblemBottom, BoxTop, View, Page, Window float64
				Beside, Top                                           bool
			}
			bad := "name: more\nversion: \"1\"\nentities:\n  badge: {ledger: nowhere, fields: {}, facts: [issued]}\n"
			if err := chromedp.Run(ctx, chromedp.SetValue("#layer-name", "more", chromedp.ByID), chromedp.SetValue("#layer-manifest", bad, chromedp.ByID),
				chromedp.Submit("#domain-layer-form", chromedp.ByID), chromedp.WaitVisible("#manifest-problem, #problem", chromedp.ByQuery),
				chromedp.Evaluate(`(() => {
					const p = document.getElementById("manifest-problem"), b = document.getElementById("layer-manifest").getBoundingClientRect();
					if (!p) return {Top: true};
					const r = p.getBoundingClientRect();
					return {Beside: true, ProblemTop: r.top, ProblemBottom: r.bottom, BoxTop: b.top, View: innerHeight, Top: !!document.getElementById("problem"),
						Page: document.documentElement.scrollWidth, Window: document.documentElement.clientWidth};
				})()`, &at)); err != nil {
				return err
			}
			if !at.Beside {
				t.Errorf("at %d px the refused manifest's problems are only at the top of the page", width)
				return nil
			}
			if gap := at.BoxTop - at.ProblemBottom; gap < 0 || gap > 16 {
				t.Errorf("at %d px the refused manifest's problems end %.0f px from its box, want right beside it", width, gap)
			}
			if at.ProblemTop < 0 || at.BoxTop > at.View {
				t.Errorf("at %d px the refused manifest's problems (top %.0f) and box (top %.0f) are not in the window of %.0f px", width, at.ProblemTop, at.BoxTop, at.View)
			}
			if at.Top {
				t.Errorf("at %d px the refused manifest's problems are shown at the top of the page too", width)
			}
			if at.Page > at.Window {
				t.Errorf("the refused manifest's page at %d px is %.0f px wide", width, at.Page)
			}
			return nil
		})
	}
	tenantViews := []string{"/console/webhooks", "/console/webhooks/new", "/console/webhooks/" + cfg["id"].(string) + "/edit",
		"/console/webhooks/" + cfg["id"].(string) + "/archive", "/console/deliveries", "/console/dead-letters", "/console/keys",
		"/console/delivery-stats", "/console/projections", "/console/dead-letters/replay-all"}
	operatorViews := []string{"/console/domain", "/console/plugins", "/console/stream", "/console/all-projections"}
	run(t, browserSignIn(base, admin), chartsNarrow(t, base, "/console/delivery-stats"))
	run(t, browserSignIn(base, operator), chartsNarrow(t, base, "/console/stream"))
	for _, width := range []int64{1280, 375} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			run(t, browserSignIn(base, admin), fits(width, tenantViews...))
			run(t, browserSignIn(base, operator), fits(width, operatorViews...))
			run(t, browserSignIn(base, operator), domain(width))
			run(t, chromedp.ActionFunc(func(ctx context.Context) error {
				return fits(width, "/console/sign-in").Do(ctx)
			}))
		})
	}
}

// chartsNarrow draws each view's charts in a wide window, then narrows
// the window: the charts follow it (drawn once, at the first width, they
// overflowed it).
func chartsNarrow(t *testing.T, base string, views ...string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for _, v := range views {
			var charts int
			if err := chromedp.Run(ctx, emulation.SetDeviceMetricsOverride(1280, 800, 1, false), chromedp.Navigate(base+v),
				chromedp.WaitVisible("main canvas", chromedp.ByQuery), chromedp.Evaluate(`document.querySelectorAll("main canvas").length`, &charts),
				emulation.SetDeviceMetricsOverride(375, 800, 1, true)); err != nil {
				return fmt.Errorf("%s: %w", v, err)
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := chromedp.Run(wctx, chromedp.Poll(`document.documentElement.scrollWidth <= document.documentElement.clientWidth`, nil))
			cancel()
			if err != nil {
				var got []int64
				chromedp.Run(ctx, chromedp.Evaluate(`[document.documentElement.scrollWidth, document.documentElement.clientWidth, ...[...document.querySelectorAll("main canvas")].map(c => c.getBoundingClientRect().width)]`, &got))
				t.Errorf("%s with %d charts drawn at 1280 px, narrowed to 375 px: page, window and chart widths %v", v, charts, got)
			}
		}
		return nil
	})
}

// A view loaded in place says so while on its way, and says when the
// server cannot be reached or does not answer: a click on "Deliveries"
// with the server down left the page unchanged, without a word.
func TestBrowserNavigationSaysWhenTheServerIsDownOrSlow(t *testing.T) {
	a := setup(t, app.Config{Addr: "127.0.0.1:0"})
	base := serve(t, a)
	run := chromeTabs(t)
	admin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	var mu sync.Mutex
	mode := "down"
	intercept := chromedp.ActionFunc(func(ctx context.Context) error {
		c := chromedp.FromContext(ctx)
		chromedp.ListenTarget(ctx, func(ev any) {
			e, ok := ev.(*fetch.EventRequestPaused)
			if !ok {
				return
			}
			mu.Lock()
			m := mode
			mu.Unlock()
			if m == "frozen" {
				return // never answered
			}
			go func() {
				_ = fetch.FailRequest(e.RequestID, network.ErrorReasonConnectionRefused).Do(cdp.WithExecutor(ctx, c.Target))
			}()
		})
		return fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/console/deliveries*"}}).Do(ctx)
	})
	var down, slow, loc string
	var busyShown, busyAfter bool
	run(t, browserSignIn(base, admin), chromedp.WaitVisible("#dead-letters", chromedp.ByID), intercept,
		chromedp.Click("#nav-deliveries", chromedp.ByID),
		chromedp.WaitVisible("#net-error", chromedp.ByID), chromedp.Text("#net-error", &down, chromedp.ByID), chromedp.Location(&loc),
		chromedp.ActionFunc(func(context.Context) error { mu.Lock(); mode = "frozen"; mu.Unlock(); return nil }),
		chromedp.Evaluate(`htmx.config.timeout = 1500; true`, nil),
		chromedp.Click("#nav-deliveries", chromedp.ByID),
		chromedp.WaitVisible("#busy", chromedp.ByID),
		chromedp.Evaluate(`!document.getElementById("busy").hidden && !document.getElementById("net-error")`, &busyShown),
		chromedp.WaitVisible("#net-error", chromedp.ByID), chromedp.Text("#net-error", &slow, chromedp.ByID),
		chromedp.Evaluate(`document.getElementById("busy").hidden`, &busyAfter))
	if !strings.Contains(down, "could not be reached") || !strings.HasSuffix(loc, "/console/dead-letters") {
		t.Errorf("with the server down the page says %q at %s, want the error on the page it was", down, loc)
	}
	if !busyShown || !busyAfter {
		t.Errorf("the in-flight indicator: shown while waiting %v, hidden after %v", busyShown, busyAfter)
	}
	if !strings.Contains(slow, "did not answer in time") {
		t.Errorf("with the server frozen the page says %q", slow)
	}
}

// The chart's legend isolates a group's values as its table does.
func TestBrowserGroupValuesAreIsolated(t *testing.T) {
	a := setup(t, app.Config{Addr: "127.0.0.1:0"})
	base := serve(t, a)
	run := chromeTabs(t)
	key, _ := newKey(t, a, "acme", auth.ModeAdmin)
	cfg := chartedProjection(t, a, key, false, "abc\u202edef")
	var labels []string
	run(t, browserSignIn(base, key), chromedp.Navigate(base+"/console/projections?id="+cfg+"&from=2024-01-15T09:00&to=2024-01-15T11:00"),
		chromedp.WaitVisible("#chart canvas", chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#chart .u-legend .u-series .u-label")].map(l => l.textContent)`, &labels))
	want := "\u2068data.channel\u2069: \u2068abc\u202edef\u2069, \u2068data.kind\u2069: \u2068in\u2069"
	if !slices.Contains(labels, want) {
		t.Errorf("the legend's labels %q, want %q among them", labels, want)
	}
}
