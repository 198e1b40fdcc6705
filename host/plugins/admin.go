package plugins

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/host/gateway"
	"github.com/factline/factline/host/platform"
	"github.com/factline/factline/host/problem"
	"github.com/factline/factline/host/wasm"
)

// MaxModuleBytes bounds an uploaded plugin.
const MaxModuleBytes = 32 << 20

// Mount registers the operator endpoints:
//
//	GET  /v1/admin/plugins                 list loaded plugins
//	PUT  /v1/admin/plugins/:name           install a new version (body: the .wasm)
//	POST /v1/admin/plugins/:name/rollback  back to the previous version
//	POST /v1/admin/ledgers/:type/rebuild   re-derive the tenant's snapshots
//
// Plugins are shared by every tenant, so installing and rolling back need
// an admin key of the operator tenant; listing and rebuilding need any
// admin key.
func (m *Manager) Mount(srv *gateway.Server, p *platform.Service, operatorTenant string) {
	operator := func(c *fiber.Ctx) error {
		if gateway.Tenant(c) != operatorTenant {
			return problem.Newf(problem.Forbidden, "Plugins are managed by admin keys of the operator tenant (%s)", operatorTenant)
		}
		return nil
	}
	srv.Mount(fiber.MethodGet, "/v1/admin/plugins", gateway.AdminKey, func(c *fiber.Ctx) error {
		return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": m.List()})
	})
	srv.Mount(fiber.MethodPut, "/v1/admin/plugins/:name", gateway.AdminKey, func(c *fiber.Ctx) error {
		if err := operator(c); err != nil {
			return err
		}
		ct := strings.ToLower(c.Get(fiber.HeaderContentType))
		if ct != "" && !strings.HasPrefix(ct, "application/wasm") && !strings.HasPrefix(ct, "application/octet-stream") {
			return problem.Newf(problem.UnsupportedMediaType, "Content-Type must be application/wasm (got %s)", ct)
		}
		body := c.Body()
		if len(body) == 0 {
			return problem.New(problem.BadRequest, "Request body is required: send the plugin's .wasm file")
		}
		if len(body) > MaxModuleBytes {
			return problem.Newf(problem.PayloadTooLarge, "A plugin may be at most %d bytes", MaxModuleBytes)
		}
		module := append([]byte(nil), body...) // fiber reuses the body
		name := strings.Clone(c.Params("name"))
		prev, hadPrev := m.Registry().Get(name)
		p, err := m.Install(gateway.Context(c), name, module)
		if err != nil {
			return refused(name, err)
		}
		status := fiber.StatusCreated
		if hadPrev && prev.SHA256() == p.SHA256() {
			status = fiber.StatusOK
		}
		return gateway.Respond(c, status, info(m, p))
	})
	srv.Mount(fiber.MethodPost, "/v1/admin/plugins/:name/rollback", gateway.AdminKey, func(c *fiber.Ctx) error {
		if err := operator(c); err != nil {
			return err
		}
		name := strings.Clone(c.Params("name"))
		if _, ok := m.Registry().Get(name); !ok {
			return problem.Newf(problem.NotFound, "Plugin %s not found", name)
		}
		p, err := m.Rollback(gateway.Context(c), name)
		if errors.Is(err, wasm.ErrNoPrevious) {
			return problem.Newf(problem.Conflict, "Plugin %s has no previous version to roll back to", name)
		}
		if err != nil {
			return refused(name, err)
		}
		return gateway.Respond(c, fiber.StatusOK, info(m, p))
	})
	srv.Mount(fiber.MethodPost, "/v1/admin/ledgers/:type/rebuild", gateway.AdminKey, func(c *fiber.Ctx) error {
		res, err := p.RebuildSnapshots(gateway.Context(c), gateway.Tenant(c), strings.Clone(c.Params("type")))
		if err != nil {
			return err
		}
		return gateway.Respond(c, fiber.StatusOK, res)
	})
}

func info(m *Manager, p *wasm.Plugin) any {
	for _, i := range m.List() {
		if i.Name == p.Description().Name {
			return i
		}
	}
	return fiber.Map{"name": p.Description().Name, "version": p.Description().Version, "sha256": p.SHA256()}
}

// refused turns a load or check failure into a 422 listing every reason.
func refused(name string, err error) error {
	var le *wasm.LoadError
	reasons := []string{err.Error()}
	if errors.As(err, &le) && len(le.Reasons) > 0 {
		reasons = le.Reasons
	}
	pe := problem.Wrap(problem.Unprocessable, fmt.Sprintf("Plugin %s was refused; the current version keeps serving", name), err)
	for _, r := range reasons {
		pe.Errors = append(pe.Errors, problem.FieldError{Field: "plugin", Code: "refused", Message: r})
	}
	return pe
}
