package gateway

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/host/auth"
)

// Access says who may call an endpoint mounted with Mount.
type Access int

// Access levels.
const (
	// AnyKey needs a valid API key of any mode.
	AnyKey Access = iota
	// AdminKey needs an admin key (403 for other modes).
	AdminKey
)

// Mount registers an extra endpoint (for example the webhook or plugin
// administration API) behind the same API-key check, problem errors,
// request ids, logs and metrics as the platform routes. Mount before
// serving. The manifest's routes are matched first; a request none of them
// serves falls through to mounted endpoints.
func (s *Server) Mount(method, path string, access Access, h fiber.Handler) {
	handlers := []fiber.Handler{s.requireKey}
	if access == AdminKey {
		handlers = append(handlers, requireAdmin)
	}
	s.app.Add(method, path, append(handlers, h)...)
}

// Principal returns the authenticated caller of a request (nil on public
// routes).
func Principal(c *fiber.Ctx) *auth.Principal { return principal(c) }

// Tenant returns the authenticated caller's tenant.
func Tenant(c *fiber.Ctx) string { return tenant(c) }

// Context returns the request's context, with its deadline.
func Context(c *fiber.Ctx) context.Context { return ctx(c) }

// RequestID returns the request's id.
func RequestID(c *fiber.Ctx) string { return requestID(c) }

// Respond writes data inside the {data, meta} envelope.
func Respond(c *fiber.Ctx, status int, data any) error { return respond(c, status, data) }

// ReadJSON checks the content type and decodes the body as a JSON object
// with exact numbers, returning it and a copy of the raw body.
func ReadJSON(c *fiber.Ctx) (map[string]any, []byte, error) { return readJSON(c) }
