package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
)

// putDomainLayer installs or replaces one stored domain manifest through
// PUT /v1/admin/domain/:name: the API runs every check against the merged
// model and stored data and refuses the change whole, with file:line:col
// problems that the page lists.
func (c *Console) putDomainLayer(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	name := strings.TrimSpace(fc.FormValue("name"))
	source := fc.FormValue("manifest")
	if name == "" || strings.TrimSpace(source) == "" {
		return c.render(fc, s, fiber.StatusBadRequest, "message", nil,
			&apiError{Status: 400, Title: "Bad Request", Detail: "Name the domain manifest and paste its YAML"})
	}
	err := c.call(ctx, s, http.MethodPut, "/v1/admin/domain/"+url.PathEscape(name), "application/yaml", []byte(source), nil)
	return c.done(fc, s, "/domain", "Domain manifest "+name+" installed", err)
}

// deleteDomainLayer removes one stored domain manifest through DELETE
// /v1/admin/domain/:name, once the form's confirmation box is ticked (no
// script dialog: the console's CSP forbids inline script).
func (c *Console) deleteDomainLayer(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	name := gateway.Param(fc, "name")
	if fc.FormValue("confirm") != "yes" {
		return c.render(fc, s, fiber.StatusBadRequest, "message", nil,
			&apiError{Status: 400, Title: "Bad Request", Detail: "Tick the box to confirm removing domain manifest " + name})
	}
	err := c.call(ctx, s, http.MethodDelete, "/v1/admin/domain/"+url.PathEscape(name), "", nil, nil)
	return c.done(fc, s, "/domain", "Domain manifest "+name+" removed", err)
}
