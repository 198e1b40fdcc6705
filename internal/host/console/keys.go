package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
)

// keysPage lists the tenant's API keys (GET /v1/admin/keys).
func (c *Console) keysPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	var out map[string]any
	err := c.call(ctx, s, http.MethodGet, "/v1/admin/keys", "", nil, &out)
	return c.show(fc, s, "keys", out, err)
}

// createKey issues a key through POST /v1/admin/keys and shows it once,
// on the reveal page.
func (c *Console) createKey(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	form := map[string]string{"mode": strings.TrimSpace(fc.FormValue("mode")), "name": strings.TrimSpace(fc.FormValue("name"))}
	body, _ := json.Marshal(form)
	var out map[string]any
	err := c.call(ctx, s, http.MethodPost, "/v1/admin/keys", "application/json", body, &out)
	var pe *apiError
	if errors.As(err, &pe) && pe.Status == http.StatusBadRequest {
		// Something to fix in the form: the view again, the refusal
		// beside the form and what was typed kept.
		var list map[string]any
		if lerr := c.call(ctx, s, http.MethodGet, "/v1/admin/keys", "", nil, &list); lerr != nil {
			return c.done(fc, s, "/keys", "", lerr)
		}
		list["form"] = form
		return c.render(fc, s, pe.Status, "keys", list, pe)
	}
	if err != nil {
		return c.done(fc, s, "/keys", "", err)
	}
	return c.reveal(fc, s, "new-key", out)
}

// revokeKey revokes through DELETE /v1/admin/keys/:id; revoking the
// session's own key ends the session on its next request.
func (c *Console) revokeKey(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	id := gateway.Param(fc, "id")
	if !confirmed(fc) {
		return c.unconfirmed(fc, s, "Tick the box to confirm revoking key "+id+": its clients are refused from then on")
	}
	err := c.call(ctx, s, http.MethodDelete, "/v1/admin/keys/"+url.PathEscape(id), "", nil, nil)
	return c.done(fc, s, "/keys", "Key "+id+" revoked", err)
}
