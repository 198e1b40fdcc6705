package console

import (
	"errors"
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
	var pe *apiError
	if errors.As(err, &pe) && (pe.Status == fiber.StatusBadRequest || pe.Status == fiber.StatusConflict || pe.Status == fiber.StatusUnprocessableEntity) {
		// A refused manifest comes back in its box to be corrected rather
		// than typed again, its problems right beside the box (not at the
		// top of the page, above the model's tables, a long way from it).
		var model map[string]any
		if merr := c.call(ctx, s, http.MethodGet, "/v1/admin/domain", "", nil, &model); merr != nil || model == nil {
			model = map[string]any{}
		}
		model["form"] = domainForm{Name: name, Manifest: source}
		if pe.TraceID == "" {
			pe.TraceID = gateway.RequestID(fc)
		}
		model["refused"] = pe
		return c.render(fc, s, pe.Status, "domain", model, nil)
	}
	return c.done(fc, s, "/domain", "Domain manifest "+name+" installed", err)
}

// domainForm is the domain manifest form, echoed back when refused.
type domainForm struct {
	Name, Manifest string
}

// deleteDomainLayer removes one stored domain manifest through DELETE
// /v1/admin/domain/:name, once the form's confirmation box is ticked.
func (c *Console) deleteDomainLayer(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	name := gateway.Param(fc, "name")
	if !confirmed(fc) {
		return c.unconfirmed(fc, s, "Tick the box to confirm removing domain manifest "+name)
	}
	err := c.call(ctx, s, http.MethodDelete, "/v1/admin/domain/"+url.PathEscape(name), "", nil, nil)
	return c.done(fc, s, "/domain", "Domain manifest "+name+" removed", err)
}
