package console_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/factline/factline/host/app"
	"github.com/factline/factline/host/auth"
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
	chromium := testutil.Chromium(t)
	a := setup(t, app.Config{Addr: "127.0.0.1:0"})
	base := serve(t, a)
	out := artifacts(t)
	t.Logf("screenshots in %s", out)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.Flag("headless", true), chromedp.WindowSize(1280, 800))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Run(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}

	operator, _ := newKey(t, a, "operator", auth.ModeAdmin)
	acmeAdmin, _ := newKey(t, a, "acme", auth.ModeAdmin)
	acmeLive, _ := newKey(t, a, "acme", auth.ModeLive)

	// run does the actions in a fresh tab with no cookies, within a minute.
	run := func(t *testing.T, actions ...chromedp.Action) {
		t.Helper()
		tab, cancel := chromedp.NewContext(browser)
		defer cancel()
		tab, cancelT := context.WithTimeout(tab, time.Minute)
		defer cancelT()
		if err := chromedp.Run(tab, append([]chromedp.Action{network.ClearBrowserCookies()}, actions...)...); err != nil {
			t.Fatal(err)
		}
	}
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

	t.Run("OperatorSeesPlugins", func(t *testing.T) {
		var nav, table, problem string
		run(t, signIn(operator),
			chromedp.WaitVisible("#plugins", chromedp.ByID), text("nav", &nav), text("#plugins", &table), shot("plugins"),
			// A module the API refuses: its problem is shown in the page.
			chromedp.SendKeys("#name", "account", chromedp.ByID),
			chromedp.SetUploadFiles("#module", []string{writeFile(t, "broken.wasm", "\x00asm not really")}, chromedp.ByID),
			chromedp.Submit("#upload", chromedp.ByID),
			chromedp.WaitVisible("#problem", chromedp.ByID), text("#problem", &problem), shot("plugins-refused"))
		if !strings.Contains(nav, "Plugins") || !strings.Contains(nav, "Dead letters") {
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
		if strings.Contains(nav, "Plugins") || !strings.Contains(nav, "Dead letters") || tenant != "acme" {
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
		if strings.Contains(nav, "Dead letters") || strings.Contains(nav, "Plugins") {
			t.Errorf("live key nav %q", nav)
		}
		if !strings.Contains(body, "403") {
			t.Errorf("live key on dead letters sees %q, want the API's 403", body)
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
}

func writeFile(t *testing.T, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
