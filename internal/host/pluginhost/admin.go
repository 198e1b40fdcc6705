package pluginhost

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/wasm"
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
	for _, r := range m.routes(p, operatorTenant) {
		srv.Mount(r.Doc, r.Handler)
	}
}

// Endpoints documents the endpoints Mount adds.
func Endpoints() []openapi.Endpoint { return gateway.Docs((*Manager)(nil).routes(nil, "")) }

// pluginInfo is a loaded plugin as the admin endpoints show it.
var pluginInfo = openapi.FreeObject("A plugin: name, version, sha256, what it serves (ledgers, handlers, commands), whether it is built in, and its previous version (previous, previous_sha256) when it has one.")

func (m *Manager) routes(p *platform.Service, operatorTenant string) []gateway.Route {
	const (
		ok, created, bad, notFound, conflict, unproc = http.StatusOK, http.StatusCreated, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity
	)
	name := openapi.NameParam("plugin")
	operator := func(c *fiber.Ctx) error {
		if gateway.Tenant(c) != operatorTenant {
			return problem.Newf(problem.Forbidden, "Plugins are managed by admin keys of the operator tenant (%s)", operatorTenant)
		}
		return nil
	}
	list := func(c *fiber.Ctx) error {
		// Call statistics count every tenant's requests.
		if err := operator(c); err != nil {
			return err
		}
		return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": m.List()})
	}
	install := func(c *fiber.Ctx) error {
		if err := operator(c); err != nil {
			return err
		}
		ct := strings.ToLower(c.Get(fiber.HeaderContentType))
		if ct != "" && !strings.HasPrefix(ct, "application/wasm") && !strings.HasPrefix(ct, "application/octet-stream") {
			return problem.Newf(problem.UnsupportedMediaType, "Content-Type must be application/wasm (got %s)", ct)
		}
		// A name no module can describe itself by is refused before the
		// body is compiled.
		if name := gateway.Param(c, "name"); !wasm.ValidPluginName(name) {
			return problem.Newf(problem.BadRequest, "Plugin name %s is not one: a plugin name is a lowercase letter, then up to 63 lowercase letters, digits, _ or -", strconv.QuoteToASCII(cut(name, 64)))
		}
		body := c.Body()
		if len(body) == 0 {
			return problem.New(problem.BadRequest, "Request body is required: send the plugin's .wasm file")
		}
		if len(body) > MaxModuleBytes {
			return problem.Newf(problem.PayloadTooLarge, "A plugin may be at most %d bytes", MaxModuleBytes)
		}
		module := append([]byte(nil), body...) // fiber reuses the body
		name := gateway.Param(c, "name")
		_, serving := m.Registry().Get(name)
		p, changed, err := m.install(gateway.Context(c), name, module)
		if err != nil {
			return refused(name, serving, err)
		}
		// The store says whether anything changed, not what this process
		// served: another process may have installed these bytes, or
		// replaced them, before this one followed.
		status := fiber.StatusCreated
		if !changed {
			status = fiber.StatusOK
		}
		return gateway.Respond(c, status, info(m, p))
	}
	rollback := func(c *fiber.Ctx) error {
		if err := operator(c); err != nil {
			return err
		}
		name := gateway.Param(c, "name")
		if _, ok := m.Registry().Get(name); !ok {
			return problem.Newf(problem.NotFound, "Plugin %s not found", name)
		}
		p, err := m.Rollback(gateway.Context(c), name)
		if errors.Is(err, wasm.ErrNoPrevious) {
			return problem.Newf(problem.Conflict, "Plugin %s has no previous version to roll back to", name)
		}
		if errors.Is(err, store.ErrVersionConflict) {
			return problem.Newf(problem.Conflict, "Plugin %s was not rolled back: it changed meanwhile (installed or rolled back through another process); read it again", name)
		}
		if err != nil {
			return refused(name, true, err)
		}
		return gateway.Respond(c, fiber.StatusOK, info(m, p))
	}
	rebuild := func(c *fiber.Ctx) error {
		res, err := p.RebuildSnapshots(gateway.Context(c), gateway.Tenant(c), gateway.Param(c, "type"))
		if err != nil {
			return err
		}
		return gateway.Respond(c, fiber.StatusOK, res)
	}
	return []gateway.Route{
		{Handler: list, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/admin/plugins", ID: "listPlugins", Tag: openapi.TagPlugins, Access: openapi.AdminKey,
			Summary: "List the plugins", Description: "The loaded plugins, built-in ones included, what each serves and its calls (counted over every tenant). Needs an admin key of the operator tenant.",
			Status: ok, OK: "The plugins.", Data: openapi.List("The plugins.", "", pluginInfo)}},
		{Handler: install, Doc: openapi.Endpoint{Method: http.MethodPut, Path: "/v1/admin/plugins/:name", ID: "installPlugin", Tag: openapi.TagPlugins, Access: openapi.AdminKey,
			Summary: "Install or replace a plugin",
			Description: "Loads a WebAssembly module as the named plugin. It is checked (ABI, exports, a smoke call) before it serves; refused, the current version keeps serving (422 listing every reason). " +
				"Sending the version already active in the store answers 200 and changes nothing. Needs an admin key of the operator tenant.",
			Params:  []openapi.Param{name},
			Content: []openapi.Media{{Type: "application/wasm", Schema: openapi.Binary("The plugin's .wasm file.")}}, ContentDesc: "The compiled module.",
			Status: created, OK: "Installed (200 when that version was already active in the store).", Data: pluginInfo, Problems: []int{unproc}}},
		{Handler: rollback, Doc: openapi.Endpoint{Method: http.MethodPost, Path: "/v1/admin/plugins/:name/rollback", ID: "rollbackPlugin", Tag: openapi.TagPlugins, Access: openapi.AdminKey,
			Summary: "Roll a plugin back", Description: "Serves the plugin's previous version again. Needs an admin key of the operator tenant.",
			Params: []openapi.Param{name}, Status: ok, OK: "The version now served.", Data: pluginInfo, Problems: []int{notFound, conflict, unproc}}},
		{Handler: rebuild, Doc: openapi.Endpoint{Method: http.MethodPost, Path: "/v1/admin/ledgers/:type/rebuild", ID: "rebuildLedgerSnapshots", Tag: openapi.TagPlugins, Access: openapi.AdminKey,
			Summary: "Rebuild an entity type's snapshots", Description: "Recomputes the ledger snapshots of the tenant's entities of a type from their facts, after a ledger plugin changed how it folds them.",
			Params: []openapi.Param{openapi.PathParam("type", "The entity type.")}, Status: ok, OK: "What was rebuilt.",
			Data: openapi.FreeObject("How many entities were rebuilt."), Problems: []int{bad, notFound}}},
	}
}

func info(m *Manager, p *wasm.Plugin) any {
	for _, i := range m.List() {
		if i.Name == p.Description().Name {
			return i
		}
	}
	return fiber.Map{"name": p.Description().Name, "version": p.Description().Version, "sha256": p.SHA256()}
}

// refused turns a load or check failure (a *wasm.LoadError) into a 422
// listing every reason; serving says whether a version of the plugin
// serves meanwhile. Any other error, the store's above all, is returned as
// it is: the gateway answers it (503 with Retry-After for a database that
// cannot be reached) and logs its text, which names the database's
// internals and is nothing a plugin author can act on.
func refused(name string, serving bool, err error) error {
	var le *wasm.LoadError
	if !errors.As(err, &le) {
		return err
	}
	reasons := le.Reasons
	if len(reasons) == 0 {
		reasons = []string{err.Error()}
	}
	detail := fmt.Sprintf("Plugin %s was refused; the current version keeps serving", name)
	if !serving {
		detail = fmt.Sprintf("Plugin %s was refused; nothing was installed", name)
	}
	pe := problem.Wrap(problem.Unprocessable, detail, err)
	for _, r := range reasons {
		pe.Errors = append(pe.Errors, problem.FieldError{Field: "plugin", Code: "refused", Message: r})
	}
	return pe
}

// cut is s cut to at most n runes.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}
