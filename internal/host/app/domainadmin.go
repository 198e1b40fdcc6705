package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// layerNameRe bounds the names of stored domain manifests: they appear in
// paths and in problems as domain/<name>.
var layerNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// mountDomainAdmin registers the operator endpoints of the domain model:
//
//	GET    /v1/admin/domain        list the stored domain manifests
//	PUT    /v1/admin/domain/:name  install or replace one (YAML or JSON)
//	DELETE /v1/admin/domain/:name  remove one
//
// The model is shared by every tenant, so changing it needs an admin key
// of the operator tenant; listing needs any admin key, as for plugins.
func (a *App) mountDomainAdmin(srv *gateway.Server) {
	for _, r := range a.domainRoutes() {
		srv.Mount(r.Doc, r.Handler)
	}
}

// manifestBody is a domain manifest sent as YAML or JSON, in every media
// type manifestMediaType takes.
var manifestBody = func() []openapi.Media {
	out := []openapi.Media{{Type: "application/json", Schema: openapi.FreeObject("The domain manifest as JSON.")}}
	for _, t := range manifestMediaTypes {
		if t != "application/json" {
			out = append(out, openapi.Media{Type: t, Schema: openapi.String("The domain manifest as YAML (a JSON document is YAML too).")})
		}
	}
	return out
}()

func (a *App) domainRoutes() []gateway.Route {
	const (
		ok, created, bad, notFound = http.StatusOK, http.StatusCreated, http.StatusBadRequest, http.StatusNotFound
	)
	operator := func(c *fiber.Ctx) (string, error) {
		if gateway.Tenant(c) != a.cfg.OperatorTenant {
			return "", problem.Newf(problem.Forbidden, "The domain model is managed by admin keys of the operator tenant (%s)", a.cfg.OperatorTenant)
		}
		name := gateway.Param(c, "name")
		if !layerNameRe.MatchString(name) {
			return "", problem.Newf(problem.BadRequest, "Domain manifest name %q must be 1 to 64 lowercase letters, digits, '_' or '-', starting with a letter or digit", name)
		}
		return name, nil
	}
	list := func(c *fiber.Ctx) error {
		// The model spans every tenant, as the console's domain view,
		// which shows the same, for the operator's keys alone.
		if gateway.Tenant(c) != a.cfg.OperatorTenant {
			return problem.Newf(problem.Forbidden, "The domain model is managed by admin keys of the operator tenant (%s)", a.cfg.OperatorTenant)
		}
		stored, err := a.Store.ListDomainLayers(gateway.Context(c))
		if err != nil {
			return err
		}
		items := make([]fiber.Map, 0, len(stored))
		for _, l := range stored {
			items = append(items, layerInfo(l))
		}
		d := a.Platform.Domain()
		return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": items, "entity_types": d.EntityTypeNames(), "entities": a.domainEntities(d)})
	}
	put := func(c *fiber.Ctx) error {
		name, err := operator(c)
		if err != nil {
			return err
		}
		if err := manifestMediaType(c.Get(fiber.HeaderContentType)); err != nil {
			return err
		}
		if len(c.Body()) == 0 {
			return problem.New(problem.BadRequest, "Request body is required: send the domain manifest as YAML or JSON")
		}
		src := append([]byte(nil), c.Body()...) // fiber reuses the body
		if err := manifest.CheckDomainName(StoredDomainFile(name), src, name); err != nil {
			return refusedDomain(name, err)
		}
		if err := a.parsesWithLedgers(gateway.Context(c), StoredDomainFile(name), src); err != nil {
			return refusedDomain(name, err)
		}
		sum := sha256.Sum256(src)
		l := store.DomainLayer{Name: name, Source: src, SHA256: hex.EncodeToString(sum[:]), UpdatedAt: time.Now().UnixMilli()}
		status := fiber.StatusCreated
		err = a.changeLayers(c, name, func(stored []store.DomainLayer) ([]store.DomainLayer, error) {
			i := slices.IndexFunc(stored, func(s store.DomainLayer) bool { return s.Name == name })
			if i < 0 {
				status = fiber.StatusCreated
				stored = append(stored, l)
				slices.SortFunc(stored, func(x, y store.DomainLayer) int { return strings.Compare(x.Name, y.Name) })
			} else {
				status = fiber.StatusOK
				stored[i] = l
			}
			return stored, nil
		}, func(expect string) error { return a.Store.PutDomainLayer(gateway.Context(c), &l, expect) })
		if err != nil {
			return err
		}
		return gateway.Respond(c, status, layerInfo(l))
	}
	remove := func(c *fiber.Ctx) error {
		name, err := operator(c)
		if err != nil {
			return err
		}
		var gone store.DomainLayer
		err = a.changeLayers(c, name, func(stored []store.DomainLayer) ([]store.DomainLayer, error) {
			i := slices.IndexFunc(stored, func(s store.DomainLayer) bool { return s.Name == name })
			if i < 0 {
				return nil, problem.Newf(problem.NotFound, "Domain manifest %s not found", name)
			}
			gone = stored[i]
			return slices.Delete(stored, i, i+1), nil
		}, func(expect string) error { return a.Store.DeleteDomainLayer(gateway.Context(c), name, expect) })
		if err != nil {
			return err
		}
		return gateway.Respond(c, fiber.StatusOK, layerInfo(gone))
	}
	return []gateway.Route{
		{Handler: list, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/admin/domain", ID: "listDomainManifests", Tag: openapi.TagAdmin,
			Summary: "List the stored domain manifests", Access: openapi.AdminKey,
			Description: "Domain manifests installed through the admin API, which every process layers over its own (the built-in one, then --domain files, then these by name). Needs an admin key of the operator tenant.",
			Status:      ok, OK: "The manifests and the served entity types.", Data: openapi.Ref("DomainManifestList")}},
		{Handler: put, Doc: openapi.Endpoint{Method: http.MethodPut, Path: "/v1/admin/domain/:name", ID: "putDomainManifest", Tag: openapi.TagAdmin,
			Summary: "Install or replace a domain manifest", Access: openapi.AdminKey,
			Content: manifestBody, ContentDesc: "A domain manifest (see factline check).",
			Description: "Adds entity types, or fact types to existing ones, for every tenant. The model it gives is checked against the served one and the stored data (fields with data, required fields, slots, fact types in use, ledger names); with problems it is refused whole (422, each problem in errors as domain/<name>:line:col) and the current model keeps serving. Otherwise this process serves it at once and the others within seconds. Needs an admin key of the operator tenant.",
			Params:      []openapi.Param{openapi.NameParam("domain manifest")},
			Status:      created, OK: "Installed (200 when it replaced one of that name).", Data: openapi.Ref("DomainManifestInfo"),
			Problems: []int{bad, http.StatusUnprocessableEntity}}},
		{Handler: remove, Doc: openapi.Endpoint{Method: http.MethodDelete, Path: "/v1/admin/domain/:name", ID: "deleteDomainManifest", Tag: openapi.TagAdmin,
			Summary: "Remove a domain manifest", Access: openapi.AdminKey,
			Description: "Removes a stored domain manifest; refused (422) when an entity type only it declares has stored entities. Needs an admin key of the operator tenant.",
			Params:      []openapi.Param{openapi.NameParam("domain manifest")},
			Status:      ok, OK: "The removed manifest.", Data: openapi.Ref("DomainManifestInfo"),
			Problems: []int{bad, notFound, http.StatusUnprocessableEntity}}},
	}
}

// changeLayers runs one admin change of the stored domain manifests: the
// model edit gives is checked like any other change, then write stores it
// if the stored manifests are still those the check started from (their
// digest), and this process swaps it in at once (the others within a
// poll). A change another process stored in between makes it start over
// from the new manifests, so two changes made at once are each checked
// against the other; after a few such rounds it answers 409.
//
// A change that removes entity types is then held against the data once
// more, after every process has had time to apply it (settleWait): until
// it had, a process still serving the old model could store entities of
// a removed type. If any did, the manifest's previous version is put
// back and the change answers 409.
func (a *App) changeLayers(c *fiber.Ctx, name string, edit func([]store.DomainLayer) ([]store.DomainLayer, error), write func(expect string) error) error {
	removed, prev, err := a.changeLayersLocked(c, name, edit, write)
	if err != nil || len(removed) == 0 {
		return err
	}
	ctx := gateway.Context(c)
	select {
	case <-time.After(a.settleWait()):
	case <-ctx.Done():
		return ctx.Err()
	}
	var used []string
	for _, t := range removed {
		u, err := a.Store.EntityTypeUsage(ctx, t)
		if err != nil {
			return fmt.Errorf("check the removed entity types of domain manifest %s: %w", name, err)
		}
		if u.Entities > 0 {
			used = append(used, fmt.Sprintf("%s (%d entities)", t, u.Entities))
		}
	}
	if len(used) == 0 {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if err := a.restoreLocked(ctx, prev); err != nil {
		return err
	}
	return problem.Newf(problem.Conflict, "Domain manifest %s was restored: while the change reached every process, entities of types it removes were stored (%s); remove them first, or stop writing them, and try again",
		name, strings.Join(used, ", "))
}

// restoreLocked puts the version prev of a manifest back in the store and
// applies the result here; reloadMu is held.
func (a *App) restoreLocked(ctx context.Context, prev *store.DomainLayer) error {
	stored, err := a.Store.ListDomainLayers(ctx)
	if err != nil {
		return err
	}
	if err := a.Store.PutDomainLayer(ctx, prev, store.LayersDigest(stored)); err != nil {
		return fmt.Errorf("restore domain manifest %s: %w", prev.Name, err)
	}
	restored, err := a.Store.ListDomainLayers(ctx)
	if err == nil {
		err = a.applyLocked(ctx, restored)
	}
	if err != nil {
		a.cfg.Logger.Error("domain manifest restored in the store but not applied here; the next poll or SIGHUP applies it", "manifest", prev.Name, "err", err)
	}
	return nil
}

// settleWait is how long a change takes to reach every process: two
// polls and a margin. With the embedded store only this process serves
// the data, and a request still running on the old model ends within
// moments.
func (a *App) settleWait() time.Duration {
	if a.cfg.DatabaseURL == "" {
		return 200 * time.Millisecond
	}
	return 2*domainPoll + time.Second
}

// changeLayersLocked runs the change under reloadMu; it returns the entity
// types the change removed and, when it removed any, the version of the
// manifest it changed from.
func (a *App) changeLayersLocked(c *fiber.Ctx, name string, edit func([]store.DomainLayer) ([]store.DomainLayer, error), write func(expect string) error) ([]string, *store.DomainLayer, error) {
	ctx := gateway.Context(c)
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	const rounds = 5
	var next, before []store.DomainLayer
	for round := 1; ; round++ {
		stored, err := a.Store.ListDomainLayers(ctx)
		if err != nil {
			return nil, nil, err
		}
		if next, err = edit(slices.Clone(stored)); err != nil {
			return nil, nil, err
		}
		if _, _, err := a.checkLocked(ctx, next); err != nil {
			return nil, nil, refusedDomain(name, err)
		}
		err = write(store.LayersDigest(stored))
		if err == nil {
			before = stored
			break
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, nil, problem.Newf(problem.NotFound, "Domain manifest %s not found", name)
		case errors.Is(err, store.ErrVersionConflict) && round < rounds:
			continue
		case errors.Is(err, store.ErrVersionConflict):
			return nil, nil, problem.Newf(problem.Conflict, "Domain manifest %s was not changed: the domain manifests kept changing while it was checked; try again", name)
		}
		return nil, nil, err
	}
	cur := a.Platform.Domain()
	i := slices.IndexFunc(before, func(l store.DomainLayer) bool { return l.Name == name })
	if err := a.applyLocked(ctx, next); err != nil {
		// Stored but not applied here: the data changed in between (a
		// request on the old model stored an entity of a removed type).
		// The previous version goes back, for every process.
		var me *manifest.Error
		if !errors.As(err, &me) || i < 0 {
			return nil, nil, fmt.Errorf("apply domain manifest %s: %w", name, err)
		}
		if rerr := a.restoreLocked(ctx, &before[i]); rerr != nil {
			return nil, nil, rerr
		}
		pe := problem.Wrap(problem.Conflict, fmt.Sprintf("Domain manifest %s was restored: the stored data changed while it was applied", name), err)
		for _, d := range me.Diagnostics {
			pe.Errors = append(pe.Errors, problem.FieldError{Field: "domain", Code: "refused", Message: d.String()})
		}
		return nil, nil, pe
	}
	var removed []string
	for _, t := range cur.EntityTypeNames() {
		if _, ok := a.Platform.Domain().Entities[t]; !ok {
			removed = append(removed, t)
		}
	}
	if len(removed) == 0 || i < 0 {
		return nil, nil, nil
	}
	return removed, &before[i], nil
}

// parsesWithLedgers refuses a domain manifest that does not parse with
// its problems and, beside them, those of its types whose name and ledger
// are sound against their ledgers (manifest.CheckLedgers): the answer
// lists every problem rather than the ledgers' only once the rest are
// fixed. A manifest that parses is left to the change's check.
func (a *App) parsesWithLedgers(ctx context.Context, file string, src []byte) error {
	_, err := manifest.ParseDomain(file, src)
	if err == nil {
		return nil
	}
	diags := manifest.Diagnostics(file, err)
	if partial := manifest.ParseDomainLedgers(file, src); partial != nil {
		lerr := manifest.CheckLedgers(ctx, partial, a.changeEnv())
		var me *manifest.Error
		if lerr != nil && !errors.As(lerr, &me) {
			return lerr // the store failed
		}
		diags = append(diags, manifest.Diagnostics(file, lerr)...)
	}
	manifest.SortDiagnostics(diags)
	return &manifest.Error{Diagnostics: diags}
}

// refusedDomain turns manifest problems into a 422 listing each at its
// file:line:col; other errors (the store) pass through to their mapping.
func refusedDomain(name string, err error) error {
	var me *manifest.Error
	if !errors.As(err, &me) {
		return err
	}
	pe := problem.Wrap(problem.Unprocessable, fmt.Sprintf("Domain manifest %s was refused; the current model keeps serving", name), err)
	for _, d := range me.Diagnostics {
		pe.Errors = append(pe.Errors, problem.FieldError{Field: "domain", Code: "refused", Message: d.String()})
	}
	return pe
}

// domainEntities describes the merged model: each entity type with its
// fields, its fact types and their data schemas, and the ledger serving
// it (ledger_plugin when a loaded plugin, ledger_loaded false when the
// named plugin is not loaded, so its commands answer 503).
func (a *App) domainEntities(d *manifest.Domain) []fiber.Map {
	out := make([]fiber.Map, 0, len(d.Entities))
	for _, name := range d.EntityTypeNames() {
		t := d.Entities[name]
		fields := make([]fiber.Map, 0, len(t.Fields))
		for _, f := range t.Fields {
			fields = append(fields, fiber.Map{"name": f.Name, "type": f.Type, "required": f.Required})
		}
		facts := make([]fiber.Map, 0, len(t.Facts))
		for _, fact := range t.Facts {
			m := fiber.Map{"name": fact}
			if ft := t.FactType(fact); ft != nil {
				m["description"] = ft.Description
				if ft.Schema != nil {
					sf := make([]fiber.Map, 0, len(ft.Schema.Fields))
					for _, f := range ft.Schema.Fields {
						sf = append(sf, fiber.Map{"name": f.Name, "type": f.Type, "required": f.Required, "description": f.Description})
					}
					m["schema"] = fiber.Map{"fields": sf, "additional_fields": ft.Schema.AdditionalFields}
				}
			}
			facts = append(facts, m)
		}
		_, plugin := a.ledgers.Registry.Get(t.Ledger)
		out = append(out, fiber.Map{"name": name, "description": t.Description, "ledger": t.Ledger, "ledger_plugin": plugin,
			"ledger_loaded": len(a.ledgers.Missing([]string{t.Ledger})) == 0, "fields": fields, "facts": facts})
	}
	return out
}

func layerInfo(l store.DomainLayer) fiber.Map {
	return fiber.Map{"name": l.Name, "sha256": l.SHA256, "updated_at": l.UpdatedAt, "file": StoredDomainFile(l.Name)}
}

// manifestMediaTypes are the Content-Types a domain manifest may be sent
// as (YAML is a superset of JSON); none at all is taken as YAML, as
// curl -T sends it.
var manifestMediaTypes = []string{"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "application/json", "text/plain"}

// manifestMediaType refuses a body declared as anything but a manifest's
// text, or in a charset other than UTF-8, with a 415.
func manifestMediaType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(manifestMediaTypes, mt) {
		return problem.Newf(problem.UnsupportedMediaType, "Content-Type must be one of %s (got %s)", strings.Join(manifestMediaTypes, ", "), ct)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return problem.Newf(problem.UnsupportedMediaType, "Domain manifests are UTF-8: charset %s is not accepted", cs)
	}
	return nil
}
