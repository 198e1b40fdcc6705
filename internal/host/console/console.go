package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

//go:embed assets templates
var files embed.FS

// Prefix is where the console is served.
const Prefix = "/console"

// CSP forbids inline scripts and every outside origin.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Options configure the console.
type Options struct {
	Store store.SessionStore
	Auth  *auth.Authenticator
	API   API
	// SecretKey (32 bytes) seals the API key kept in each session; every
	// process sharing the database must have the same.
	SecretKey []byte
	// OperatorTenant's admin keys see the operator views.
	OperatorTenant string
	// SessionTTL is a session's lifetime (default 8 hours).
	SessionTTL time.Duration
	Logger     *slog.Logger
	// Clock tells session and reveal expiry (default clock.Real).
	Clock clock.Clock
}

// Console serves the console pages.
type Console struct {
	opts   Options
	sealer *sealer
	pages  map[string]*template.Template
}

// New checks the options and parses the templates.
func New(opts Options) (*Console, error) {
	if opts.Store == nil || opts.Auth == nil || opts.API == nil {
		return nil, errors.New("console: store, auth and API are required")
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 8 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Clock = clock.Or(opts.Clock)
	s, err := newSealer(opts.SecretKey)
	if err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Console{opts: opts, sealer: s, pages: pages}, nil
}

// parsePages parses every page template, each with the layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	funcs := template.FuncMap{
		"ms":      clockTime,
		"num":     num,
		"percent": percent,
		"series":  seriesJSON,
		"dur": func(v any) string {
			f, _ := v.(float64)
			return time.Duration(int64(f)).String()
		},
	}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if strings.HasSuffix(n, "/layout.html") {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", n)
		if err != nil {
			return nil, err
		}
		pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return pages, nil
}

// timeLayout is how every view writes a time: to the second, in UTC.
const timeLayout = "2006-01-02 15:04:05Z"

// clockTime writes a time of the API as every view shows one
// (timeLayout). Most times come as epoch milliseconds; a few, such as a
// plugin's load time, as RFC 3339 text with nanoseconds. No time (0,
// null, Go's zero time) is "", and text that is not a time is shown as
// it came.
func clockTime(v any) string {
	switch t := v.(type) {
	case float64:
		if t != 0 {
			return time.UnixMilli(int64(t)).UTC().Format(timeLayout)
		}
	case int64:
		if t != 0 {
			return time.UnixMilli(t).UTC().Format(timeLayout)
		}
	case string:
		at, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return t
		}
		if !at.IsZero() {
			return at.UTC().Format(timeLayout)
		}
	}
	return ""
}

// Mount registers the console routes on the gateway's fiber app.
func (c *Console) Mount(app *fiber.App) {
	assets, _ := fs.Sub(files, "assets")
	g := app.Group(Prefix, headers)
	g.Use("/assets", filesystem.New(filesystem.Config{Root: http.FS(assets), MaxAge: 3600}))
	g.Get("/sign-in", c.signInPage)
	g.Post("/sign-in", c.signIn)
	g.Post("/sign-out", c.auth(true, c.signOut))
	g.Get("/", c.auth(false, c.home))
	g.Get("/plugins", c.auth(false, c.operatorOnly(c.pluginsPage)))
	g.Get("/domain", c.auth(false, c.operatorOnly(c.domainPage)))
	g.Post("/domain", c.auth(true, c.operatorOnly(c.putDomainLayer)))
	g.Post("/domain/:name/delete", c.auth(true, c.operatorOnly(c.deleteDomainLayer)))
	g.Get("/stream", c.auth(false, c.operatorOnly(c.streamPage)))
	g.Get("/all-projections", c.auth(false, c.operatorOnly(c.allProjectionsPage)))
	g.Get("/delivery-stats", c.auth(false, c.deliveryStatsPage))
	g.Post("/plugins/upload", c.auth(true, c.operatorOnly(c.uploadPlugin)))
	g.Post("/plugins/:name/rollback", c.auth(true, c.operatorOnly(c.rollbackPlugin)))
	g.Get("/dead-letters", c.auth(false, c.adminOnly(c.deadLettersPage)))
	g.Get("/dead-letters/replay-all", c.auth(false, c.adminOnly(c.replayAllPage)))
	g.Post("/dead-letters/replay-all", c.auth(true, c.adminOnly(c.replayAll)))
	g.Post("/dead-letters/:id/replay", c.auth(true, c.adminOnly(c.replay)))
	g.Get("/projections", c.auth(false, c.adminOnly(c.projectionsPage)))
	g.Get("/deliveries", c.auth(false, c.deliveriesPage))
	g.Get("/deliveries/:id", c.auth(false, c.deliveryPage))
	g.Get("/reveal", c.auth(false, c.revealPage))
	g.Get("/keys", c.auth(false, c.adminOnly(c.keysPage)))
	g.Post("/keys", c.auth(true, c.adminOnly(c.createKey)))
	g.Post("/keys/:id/revoke", c.auth(true, c.adminOnly(c.revokeKey)))
	g.Get("/webhooks", c.auth(false, c.webhooksPage))
	g.Post("/webhooks/:id/rotate-secret", c.auth(true, c.adminOnly(c.rotateSecret)))
	g.Post("/webhooks/:id/resume", c.auth(true, c.adminOnly(c.resume)))
	g.Get("/webhooks/new", c.auth(false, c.adminOnly(c.newWebhookPage)))
	g.Post("/webhooks", c.auth(true, c.adminOnly(c.saveWebhook)))
	g.Get("/webhooks/:id/edit", c.auth(false, c.adminOnly(c.editWebhookPage)))
	g.Post("/webhooks/:id", c.auth(true, c.adminOnly(c.saveWebhook)))
	g.Get("/webhooks/:id/archive", c.auth(false, c.adminOnly(c.archiveWebhookPage)))
	g.Post("/webhooks/:id/archive", c.auth(true, c.adminOnly(c.archiveWebhook)))
	g.Post("/webhooks/:id/pause", c.auth(true, c.adminOnly(c.pauseWebhook)))
}

// headers: every console answer is framed by nobody, cached by nobody
// and runs no script but the embedded files.
func headers(c *fiber.Ctx) error {
	c.Set("Content-Security-Policy", CSP)
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("Referrer-Policy", "no-referrer")
	if !strings.HasPrefix(c.Path(), Prefix+"/assets/") {
		c.Set("Cache-Control", "no-store")
	}
	return c.Next()
}

type handler func(c *fiber.Ctx, s *session) error

// reqCtx bounds the console's work for one request.
func reqCtx(c *fiber.Ctx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// auth loads the session; write handlers also need its CSRF token (a form
// field csrf or the X-CSRF-Token header).
func (c *Console) auth(write bool, h handler) fiber.Handler {
	return func(fc *fiber.Ctx) error {
		ctx, cancel := reqCtx(fc)
		defer cancel()
		s, err := c.load(ctx, fc.Cookies(CookieName))
		if errors.Is(err, errNoSession) {
			// A cookie that opens no session: it expired, was signed out
			// or its key revoked; the sign-in page says so.
			ended := fc.Cookies(CookieName) != ""
			c.clearCookie(fc)
			// A browser reading a page is sent to the sign-in page, which
			// leads back to it; any other client gets the refusal as
			// problem+json.
			if !write && gateway.AsksForHTML(fc.Get(fiber.HeaderAccept)) {
				return fc.Redirect(signInURL(fc.OriginalURL(), ended), fiber.StatusSeeOther)
			}
			// A browser's form sent after the session ended goes to the
			// sign-in page too, which says it ended and leads back to the
			// page the form was on (what was typed cannot be kept).
			if write && gateway.AsksForHTML(fc.Get(fiber.HeaderAccept)) {
				return fc.Redirect(signInURL(refererPath(fc), ended), fiber.StatusSeeOther)
			}
			// A page a navigation link loads in place (htmx, Accept */*)
			// is a page read too: htmx follows HX-Redirect whatever the
			// status.
			if !write && fc.Get("HX-Request") == "true" {
				fc.Set("HX-Redirect", signInURL(fc.OriginalURL(), ended))
			}
			return problem.New(problem.Unauthorized, "Sign in to the console first")
		}
		if err != nil {
			return problem.Wrap(problem.Unavailable, "The console cannot check its session right now", err)
		}
		if write {
			tok := fc.FormValue("csrf")
			if tok == "" {
				tok = fc.Get("X-CSRF-Token")
			}
			if !s.validCSRF(tok) {
				return problem.New(problem.Forbidden, "Missing or invalid CSRF token")
			}
		}
		return h(fc, s)
	}
}

func (c *Console) isOperator(s *session) bool {
	return s.principal.IsAdmin() && s.principal.TenantID == c.opts.OperatorTenant
}

// operatorOnly keeps the operator views from other keys. The refusal is
// the gateway's to answer, as the refusals before a view (no session, a
// bad CSRF token): a console page to a browser, problem+json to any other
// client (gateway.Server.ProblemPages, ProblemPage).
func (c *Console) operatorOnly(h handler) handler {
	return func(fc *fiber.Ctx, s *session) error {
		if !c.isOperator(s) {
			return problem.New(problem.Forbidden, "This view is for admin keys of the operator tenant")
		}
		return h(fc, s)
	}
}

// adminOnly keeps the tenant's management views and their actions (API
// keys, dead letters, webhook changes) from live and test keys; the API
// refuses their calls too. Refused as operatorOnly refuses.
func (c *Console) adminOnly(h handler) handler {
	return func(fc *fiber.Ctx, s *session) error {
		if !s.principal.IsAdmin() {
			return problem.Newf(problem.Forbidden, "This view and its actions need an admin key; this session's key is a %s key", s.principal.Mode)
		}
		return h(fc, s)
	}
}

// cookieGrace is how long the session cookie outlives its session: a
// browser drops a cookie when it expires, so a cookie expiring with its
// session would bring the next page to a bare sign-in form; one still
// sent opens no session and the sign-in page says the session ended. The
// token is worth nothing once its session has expired.
const cookieGrace = 24 * time.Hour

func (c *Console) setCookie(fc *fiber.Ctx, token string, sessionExpires time.Time) {
	fc.Cookie(&fiber.Cookie{Name: CookieName, Value: token, Path: Prefix, Expires: sessionExpires.Add(cookieGrace),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: fc.Protocol() == "https"})
}

func (c *Console) clearCookie(fc *fiber.Ctx) {
	if fc.Cookies(CookieName) == "" {
		return
	}
	fc.Cookie(&fiber.Cookie{Name: CookieName, Value: "", Path: Prefix, Expires: time.Unix(1, 0), MaxAge: -1,
		HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: fc.Protocol() == "https"})
}

// pageTitles name the views in the browser's title bar and history.
var pageTitles = map[string]string{
	"all-projections": "All projections", "dead-letters": "Dead letters", "deliveries": "Deliveries",
	"delivery-stats": "Delivery stats", "delivery": "Delivery", "domain": "Domain", "keys": "API keys",
	"new-key": "New API key", "plugins": "Plugins", "projections": "Projections",
	"replay-all": "Replay dead letters", "secret": "New signing secret", "sign-in": "Sign in",
	"stream": "Stream", "webhook-archive": "Archive webhook",
	"webhook-secret": "Webhook saved", "webhooks": "Webhooks",
}

// page is what every template gets.
type page struct {
	Name     string // the template's
	Title    string
	Session  *session
	Operator bool
	CSRF     string
	Tenant   string
	Mode     string
	Notice   string
	Problem  *apiError
	Data     any
}

func (c *Console) render(fc *fiber.Ctx, s *session, status int, name string, data any, perr *apiError) error {
	if perr != nil && perr.TraceID == "" {
		// A refusal the console made itself is logged under this request.
		perr.TraceID = gateway.RequestID(fc)
	}
	p := page{Name: name, Title: pageTitles[name], Session: s, Data: data, Problem: perr, Notice: s.notice(fc)}
	if f, ok := data.(*webhookForm); ok {
		// The form's title says what its heading says.
		p.Title = "New webhook"
		if f.ID != "" {
			p.Title = "Edit webhook " + f.ID
		}
	}
	if perr != nil && p.Title == "" {
		p.Title = fmt.Sprintf("%d %s", perr.Status, perr.Title)
	}
	if s != nil {
		p.Operator, p.CSRF, p.Tenant, p.Mode = c.isOperator(s), s.csrf, s.principal.TenantID, s.principal.Mode
	}
	var b strings.Builder
	if err := c.pages[name].Execute(&b, p); err != nil {
		return err
	}
	fc.Type("html", "utf-8")
	return fc.Status(status).SendString(b.String())
}

// show renders a view, or the API's problem in its place: beside the
// view and what the user typed for a problem they can fix there (a bad
// filter), alone on the message page when the view is not theirs or not
// there.
func (c *Console) show(fc *fiber.Ctx, s *session, name string, data any, err error) error {
	var pe *apiError
	if errors.As(err, &pe) {
		switch pe.Status {
		case fiber.StatusUnauthorized, fiber.StatusForbidden, fiber.StatusNotFound:
			name, data = "message", nil
		}
		return c.render(fc, s, pe.Status, name, data, pe)
	}
	if err != nil {
		return problem.Wrap(problem.Unavailable, "The console could not reach the API", err)
	}
	return c.render(fc, s, fiber.StatusOK, name, data, nil)
}

// confirmed reports whether a form's confirmation box is ticked (a
// checkbox, not a script dialog: the console's CSP forbids inline script),
// asked before a write that cannot be undone.
func confirmed(fc *fiber.Ctx) bool { return fc.FormValue("confirm") == "yes" }

// unconfirmed answers a form sent without its confirmation: 400 on the
// message page, nothing done.
func (c *Console) unconfirmed(fc *fiber.Ctx, s *session, detail string) error {
	return c.render(fc, s, fiber.StatusBadRequest, "message", nil,
		&apiError{Status: 400, Title: "Bad Request", Detail: detail})
}

// done answers a write: back to the view with a notice, or the view again
// with the API's problem.
func (c *Console) done(fc *fiber.Ctx, s *session, view string, notice string, err error) error {
	var pe *apiError
	if errors.As(err, &pe) {
		return c.render(fc, s, pe.Status, "message", nil, pe)
	}
	if err != nil {
		return problem.Wrap(problem.Unavailable, "The console could not reach the API", err)
	}
	return fc.Redirect(Prefix+view+"?done="+url.QueryEscape(notice)+"&n="+s.noticeMAC(notice), fiber.StatusSeeOther)
}

// noticeMAC signs a notice with the session's CSRF token: render shows
// only notices this session's own writes made, so a link cannot put text
// of its choosing ("your session expired, paste your key at ...") in the
// console's green box.
func (s *session) noticeMAC(notice string) string {
	mac := hmac.New(sha256.New, []byte(s.csrf))
	mac.Write([]byte("notice\x00" + notice))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// notice returns the request's signed notice, or "".
func (s *session) notice(fc *fiber.Ctx) string {
	n := fc.Query("done")
	if n == "" || s == nil || !hmac.Equal([]byte(fc.Query("n")), []byte(s.noticeMAC(n))) {
		return ""
	}
	return n
}

// ProblemPage renders a problem the gateway answers to a browser under
// the console (gateway.Server.ProblemPages): the refusals that come before
// a page handler runs (no session, a bad CSRF token, an oversized body,
// an unknown path) read as a console page, not as raw JSON.
func (c *Console) ProblemPage(fc *fiber.Ctx, p problem.Body) error {
	perr := &apiError{Status: p.Status, Title: p.Title, Detail: p.Detail, TraceID: p.TraceID}
	for _, fe := range p.Errors {
		perr.Errors = append(perr.Errors, fieldError{Field: fe.Field, Message: fe.Message})
	}
	// A signed-in user keeps the navigation (an unknown page, a method the
	// page does not take); the session is only read, never changed here.
	var s *session
	if tok := fc.Cookies(CookieName); tok != "" && p.Status != fiber.StatusUnauthorized {
		ctx, cancel := reqCtx(fc)
		defer cancel()
		if ls, err := c.load(ctx, tok); err == nil {
			s = ls
		}
	}
	return c.render(fc, s, p.Status, "message", map[string]any{"signIn": p.Status == fiber.StatusUnauthorized}, perr)
}

// signInURL is the sign-in page that leads back to the page asked for
// (next) and, when a session ended, says so.
// refererPath is the path and query of the page a request came from,
// when the browser said; signInURL keeps it only if it is a console page,
// and as a path it can only lead to this origin.
func refererPath(fc *fiber.Ctx) string {
	u, err := url.Parse(fc.Get(fiber.HeaderReferer))
	if err != nil || u.Path == "" {
		return ""
	}
	return u.RequestURI()
}

func signInURL(next string, ended bool) string {
	q := url.Values{}
	if localPath(next) != "" && next != Prefix+"/" {
		q.Set("next", next)
	}
	if ended {
		q.Set("ended", "1")
	}
	if len(q) == 0 {
		return Prefix + "/sign-in"
	}
	return Prefix + "/sign-in?" + q.Encode()
}

// localPath returns next if it is a console page of this origin to go to
// after signing in, else "": no other host, scheme or path (no open
// redirect), nothing a browser reads as another host ("//", "\").
func localPath(next string) string {
	if len(next) > 2048 || !strings.HasPrefix(next, Prefix+"/") || strings.ContainsAny(next, "\\") ||
		strings.Contains(next, "//") || strings.HasPrefix(next, Prefix+"/sign-") {
		return ""
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f {
			return ""
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, Prefix+"/") ||
		strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/..") {
		return ""
	}
	return next
}

// signInData is what the sign-in page shows besides the form.
func signInData(fc *fiber.Ctx) map[string]any {
	return map[string]any{"next": localPath(fc.FormValue("next", fc.Query("next"))), "ended": fc.Query("ended") == "1"}
}

func (c *Console) signInPage(fc *fiber.Ctx) error {
	return c.render(fc, nil, fiber.StatusOK, "sign-in", signInData(fc), nil)
}

// crossOrigin holds the sign-in form to its own origin (net/http's checks:
// Sec-Fetch-Site when the browser sends it, else Origin against Host; a
// client that sends neither, such as curl, passes).
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin reports whether a sign-in POST came from the console's own
// pages. A page of another site posting its own key would otherwise sign
// the victim's browser into the attacker's tenant (login CSRF), where
// what the victim then does is the attacker's to read.
func sameOrigin(fc *fiber.Ctx) bool {
	h := http.Header{}
	for _, k := range []string{"Origin", "Sec-Fetch-Site"} {
		if v := fc.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	return crossOrigin.Check(&http.Request{Method: http.MethodPost, Host: string(fc.Request().Host()), Header: h}) == nil
}

func (c *Console) signIn(fc *fiber.Ctx) error {
	if !sameOrigin(fc) {
		return problem.New(problem.Forbidden, "Sign in from the console's own sign-in page: this form came from another site")
	}
	ctx, cancel := reqCtx(fc)
	defer cancel()
	key := strings.TrimSpace(fc.FormValue("key"))
	token, s, err := c.create(ctx, key)
	if errors.Is(err, auth.ErrInvalidKey) {
		// A browser gets the form again, with the refusal; any other
		// client the problem, as every console refusal.
		if !gateway.AsksForHTML(fc.Get(fiber.HeaderAccept)) {
			return problem.New(problem.Unauthorized, "Invalid or missing API key")
		}
		return c.render(fc, nil, fiber.StatusUnauthorized, "sign-in", signInData(fc),
			&apiError{Status: 401, Title: "Unauthorized", Detail: "Invalid or missing API key"})
	}
	if err != nil {
		return problem.Wrap(problem.Unavailable, "Signing in is temporarily unavailable", err)
	}
	c.setCookie(fc, token, s.expires)
	c.purge(ctx)
	if next := localPath(fc.FormValue("next")); next != "" {
		return fc.Redirect(next, fiber.StatusSeeOther)
	}
	return fc.Redirect(Prefix+"/", fiber.StatusSeeOther)
}

// purge deletes expired sessions. It runs on each sign-in, which is what
// makes sessions, so the table stays about as large as the live sessions
// with no background worker; a failure only leaves rows no one can use.
func (c *Console) purge(ctx context.Context) {
	n, err := c.opts.Store.PurgeSessions(ctx, c.opts.Clock.Now().UnixMilli())
	if err != nil {
		c.opts.Logger.Warn("console: purge expired sessions", "err", err)
		return
	}
	if n > 0 {
		c.opts.Logger.Debug("console: purged expired sessions", "count", n)
	}
}

func (c *Console) signOut(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	if err := c.opts.Store.DeleteSession(ctx, s.id); err != nil {
		return problem.Wrap(problem.Unavailable, "Signing out is temporarily unavailable", err)
	}
	c.clearCookie(fc)
	return fc.Redirect(Prefix+"/sign-in", fiber.StatusSeeOther)
}

func (c *Console) home(fc *fiber.Ctx, s *session) error {
	switch {
	case c.isOperator(s):
		return fc.Redirect(Prefix+"/plugins", fiber.StatusSeeOther)
	case s.principal.IsAdmin():
		return fc.Redirect(Prefix+"/dead-letters", fiber.StatusSeeOther)
	}
	return fc.Redirect(Prefix+"/webhooks", fiber.StatusSeeOther)
}

func (c *Console) pluginsPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	var out struct {
		Items []map[string]any `json:"items"`
	}
	err := c.call(ctx, s, http.MethodGet, "/v1/admin/plugins", "", nil, &out)
	return c.show(fc, s, "plugins", out.Items, err)
}

func (c *Console) uploadPlugin(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	name := strings.TrimSpace(fc.FormValue("name"))
	fh, err := fc.FormFile("module")
	if err != nil || name == "" {
		return c.render(fc, s, fiber.StatusBadRequest, "message", nil,
			&apiError{Status: 400, Title: "Bad Request", Detail: "Choose a .wasm file and name the plugin"})
	}
	f, err := fh.Open()
	if err != nil {
		return problem.Wrap(problem.BadRequest, "The uploaded file cannot be read", err)
	}
	defer f.Close()
	module, err := io.ReadAll(f)
	if err != nil {
		return problem.Wrap(problem.BadRequest, "The uploaded file cannot be read", err)
	}
	var info struct {
		Version string `json:"version"`
	}
	status, err := c.callStatus(ctx, s, http.MethodPut, "/v1/admin/plugins/"+url.PathEscape(name), "application/wasm", module, &info)
	notice := "Plugin " + name + " " + info.Version + " installed"
	if status == http.StatusOK {
		notice = "Plugin " + name + " " + info.Version + " is the version serving already; nothing changed"
	}
	return c.done(fc, s, "/plugins", notice, err)
}

func (c *Console) rollbackPlugin(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	name := gateway.Param(fc, "name")
	if !confirmed(fc) {
		return c.unconfirmed(fc, s, "Tick the box to confirm rolling plugin "+name+" back: the previous build serves every call from then on")
	}
	var info struct {
		Version string `json:"version"`
		SHA256  string `json:"sha256"`
	}
	err := c.call(ctx, s, http.MethodPost, "/v1/admin/plugins/"+url.PathEscape(name)+"/rollback", "", nil, &info)
	// Two builds may carry one version: the notice names the build by
	// its digest too.
	return c.done(fc, s, "/plugins", "Plugin "+name+" rolled back to "+info.Version+" (SHA-256 "+shortSHA(info.SHA256)+")", err)
}

// shortSHA is a digest's first 12 hex digits, as the plugins view shows.
func shortSHA(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

func (c *Console) deadLettersPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	q := url.Values{"limit": {"50"}}
	if v := fc.Query("cursor"); v != "" {
		q.Set("cursor", v)
	}
	filter := strings.TrimSpace(fc.Query("config_id"))
	if filter != "" {
		q.Set("config_id", filter)
	}
	var out map[string]any
	err := c.call(ctx, s, http.MethodGet, "/v1/admin/webhooks/dead-letters?"+q.Encode(), "", nil, &out)
	if out == nil {
		out = map[string]any{}
	}
	// The filter follows the next page and the bulk replay, and stays in
	// its box.
	out["filter"] = filter
	return c.show(fc, s, "dead-letters", out, err)
}

func (c *Console) replay(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	id := gateway.Param(fc, "id")
	err := c.call(ctx, s, http.MethodPost, "/v1/admin/webhooks/dead-letters/"+url.PathEscape(id)+"/replay", "", nil, nil)
	return c.done(fc, s, "/dead-letters", "Delivery "+id+" replayed", err)
}

func (c *Console) webhooksPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	q := url.Values{"type": {"webhook"}, "limit": {"50"}}
	if v := fc.Query("cursor"); v != "" {
		q.Set("cursor", v)
	}
	var out map[string]any
	err := c.call(ctx, s, http.MethodGet, "/v1/configs?"+q.Encode(), "", nil, &out)
	if err == nil && s.principal.IsAdmin() {
		out["paused"], err = c.pausedConfigs(ctx, s)
	}
	return c.show(fc, s, "webhooks", out, err)
}

func (c *Console) rotateSecret(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	id := gateway.Param(fc, "id")
	if !confirmed(fc) {
		return c.unconfirmed(fc, s, "Tick the box to confirm rotating the signing secret of webhook "+id+": receivers must take the new one")
	}
	var out map[string]any
	err := c.call(ctx, s, http.MethodPost, "/v1/admin/webhooks/configs/"+url.PathEscape(id)+"/rotate-secret", "", nil, &out)
	var pe *apiError
	if errors.As(err, &pe) || err != nil {
		return c.done(fc, s, "/webhooks", "", err)
	}
	// The new secret is shown once, on the page the redirect leads to.
	return c.reveal(fc, s, "secret", rotationReveal(out))
}

// rotationReveal keeps of a rotation's answer what its page shows. The
// configs still using the previous secret travel as a count: a secret
// shared by 100 configs made a cookie of 6 KB, which browsers drop (and
// the listener refuses), losing the new secret. The page lists them from
// the store (usedBy).
func rotationReveal(out map[string]any) map[string]any {
	data := map[string]any{"secret": out["secret"], "secret_ref": out["secret_ref"],
		"previous_secret_ref": out["previous_secret_ref"], "previous_secret_expires_at": out["previous_secret_expires_at"]}
	if cfg, ok := out["config"].(map[string]any); ok {
		data["config_id"] = cfg["id"]
	}
	if ids, ok := out["previous_secret_used_by"].([]any); ok {
		data["used_by_count"] = len(ids)
	}
	return data
}

func (c *Console) resume(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	id := gateway.Param(fc, "id")
	err := c.call(ctx, s, http.MethodPost, "/v1/admin/webhooks/configs/"+url.PathEscape(id)+"/resume", "", nil, nil)
	return c.done(fc, s, "/webhooks", "Webhook "+id+" resumed", err)
}
