package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"
)

// A secret the API returns once (a new API key, a new signing secret) is
// shown on a page reached by a redirect, not in the answer to the POST
// that made it: reloading that answer would send the POST again and make
// a second key or secret. The POST seals the page's data into a short-lived
// cookie bound to the session and redirects to the reveal page, which
// shows it and clears the cookie; a reload finds nothing to show. The
// cookie is sealed with the console's secret key, which every process
// shares, so the redirect may land on any process.
const (
	revealCookie = "factline_console_reveal"
	revealPath   = Prefix + "/reveal"
	// revealTTL bounds how long a secret waits for its page: the redirect
	// follows at once, so two minutes is generous.
	revealTTL = 2 * time.Minute
)

// revealed is the sealed content of the reveal cookie.
type revealed struct {
	Page    string         `json:"page"`
	Data    map[string]any `json:"data"`
	Expires int64          `json:"expires"` // Unix ms
}

// revealAAD binds a sealed secret to its session: a cookie copied into
// another session opens to nothing.
func revealAAD(s *session) string { return "reveal\x00" + s.id }

// reveal answers a write whose result holds a secret: it seals the page
// to show into the reveal cookie and redirects to the reveal page.
func (c *Console) reveal(fc *fiber.Ctx, s *session, page string, data map[string]any) error {
	b, err := json.Marshal(revealed{Page: page, Data: data, Expires: c.opts.Clock.Now().Add(revealTTL).UnixMilli()})
	if err != nil {
		return err
	}
	sealed, err := c.sealer.seal(revealAAD(s), string(b))
	if err != nil {
		return err
	}
	fc.Cookie(&fiber.Cookie{Name: revealCookie, Value: base64.RawURLEncoding.EncodeToString(sealed), Path: revealPath,
		MaxAge: int(revealTTL / time.Second), HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: fc.Protocol() == "https"})
	return fc.Redirect(revealPath, fiber.StatusSeeOther)
}

// revealPage shows the sealed page once and clears the cookie; without
// one (a reload, the back button, a link) it answers 410.
func (c *Console) revealPage(fc *fiber.Ctx, s *session) error {
	raw := fc.Cookies(revealCookie)
	if raw != "" {
		fc.Cookie(&fiber.Cookie{Name: revealCookie, Value: "", Path: revealPath, Expires: time.Unix(1, 0), MaxAge: -1,
			HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode, Secure: fc.Protocol() == "https"})
	}
	if r, ok := c.openReveal(s, raw); ok {
		if n, _ := r.Data["used_by_count"].(float64); r.Page == "secret" && n > 0 {
			ctx, cancel := reqCtx(fc)
			defer cancel()
			r.Data["previous_secret_used_by"] = c.usedBy(ctx, s, str(r.Data["previous_secret_ref"]), str(r.Data["config_id"]))
		}
		return c.render(fc, s, fiber.StatusOK, r.Page, r.Data, nil)
	}
	return c.render(fc, s, fiber.StatusGone, "message", nil, &apiError{Status: fiber.StatusGone, Title: "Gone",
		Detail: "A secret is shown once, on the page that follows its creation, and is not kept. If it was not stored, create a new key or rotate the secret."})
}

// openReveal opens a reveal cookie of this session that has not expired
// and names a page that shows a secret.
func (c *Console) openReveal(s *session, raw string) (revealed, bool) {
	var r revealed
	sealed, err := base64.RawURLEncoding.DecodeString(raw)
	if raw == "" || err != nil {
		return r, false
	}
	plain, err := c.sealer.open(revealAAD(s), sealed)
	if err != nil || json.Unmarshal([]byte(plain), &r) != nil || c.opts.Clock.Now().UnixMilli() > r.Expires {
		return r, false
	}
	switch r.Page {
	case "new-key", "secret", "webhook-secret":
		return r, true
	}
	return r, false
}

// usedByPages bounds the listing of configs that share a secret: 2,000
// configs; the page says how many there are in any case.
const usedByPages = 10

// usedBy lists the tenant's active webhook configs, but the one rotated,
// whose secret reference is ref: the configs a rotation left on the
// previous secret, read when its page is shown (the reveal cookie carries
// only their count). A failed read lists none; the count still shows.
func (c *Console) usedBy(ctx context.Context, s *session, ref, except string) []string {
	var ids []string
	cursor := ""
	for range usedByPages {
		q := url.Values{"type": {"webhook"}, "status": {"active"}, "limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var out struct {
			Items []struct {
				ID       string `json:"id"`
				Settings struct {
					SecretRef string `json:"secret_ref"`
				} `json:"settings"`
			} `json:"items"`
			Cursor string `json:"cursor"`
		}
		if err := c.call(ctx, s, http.MethodGet, "/v1/configs?"+q.Encode(), "", nil, &out); err != nil {
			return ids
		}
		for _, it := range out.Items {
			if ref != "" && it.Settings.SecretRef == ref && it.ID != except {
				ids = append(ids, it.ID)
			}
		}
		if cursor = out.Cursor; cursor == "" {
			break
		}
	}
	return ids
}
