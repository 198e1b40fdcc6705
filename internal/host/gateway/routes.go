package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/idempotency"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

func (s *Server) routes() {
	s.app.Use(refuseBadText)
	// A path with an empty segment names no route: fiber's router and the
	// manifest's table would each read it their own way (//v1/status as
	// /v1/status, //v1/facts as nothing, /v1/facts/ as /v1/facts). Pages
	// for people keep the slash a browser may add: the console's (its
	// home is /console/), the API reference and the error index.
	s.app.Use(func(c *fiber.Ctx) error {
		p := c.Path()
		forPeople := strings.HasPrefix(p, "/console/") || p == "/errors/" || p == "/docs/"
		if strings.Contains(p, "//") || len(p) > 1 && strings.HasSuffix(p, "/") && !forPeople {
			// Under a platform prefix (/v1/facts/) the key comes first, as
			// on every platform path (see platformPath).
			if platformPath(p) {
				if err := s.authenticate(c); err != nil {
					return err
				}
			}
			return problem.Newf(problem.NotFound, "No route matches %s %s", c.Method(), p)
		}
		return c.Next()
	})
	for _, r := range s.platformRoutes(!s.cfg.NoMetrics) {
		s.handle(r.Doc, r.Handler)
	}
	// Routes ledgers declare for their entities (POST /v1/entities/:id/deposit),
	// described by the ledgers' command specs.
	s.app.All("/v1/entities/:id/*", s.requireKey, s.entityCommand)
	// A platform path no route matched still needs a key (see
	// platformPath); a matched platform route answered already.
	s.app.Use(func(c *fiber.Ctx) error {
		if platformPath(c.Path()) {
			return s.requireKey(c)
		}
		return c.Next()
	})

	// Everything else goes to the manifest's route table, which can be
	// swapped at run time.
	s.app.Use(s.dispatch)
}

// platformPrefixes are the platform's paths.
var platformPrefixes = []string{"/v1/entities", "/v1/facts", "/v1/configs"}

// platformPath reports whether path is one of the platform's, which the
// contract puts behind the key check on all paths, also paths no route
// matches: without a key, a client learns nothing of which paths and
// methods exist there (401, not 404 or 405).
func platformPath(path string) bool {
	for _, p := range platformPrefixes {
		if strings.HasPrefix(path, p) && (len(path) == len(p) || path[len(p)] == '/') {
			return true
		}
	}
	return false
}

// handle registers an endpoint behind the access check its documentation
// names, and records the documentation for the API description. The key
// check is attached per route, not to the /v1 group: a group middleware
// would also run for manifest routes under /v1, some of which are public.
// A GET endpoint answers HEAD too.
func (s *Server) handle(doc openapi.Endpoint, h fiber.Handler) {
	var handlers []fiber.Handler
	switch doc.Access {
	case openapi.AnyKey:
		handlers = append(handlers, s.requireKey)
	case openapi.AdminKey:
		handlers = append(handlers, s.requireKey, requireAdmin)
	}
	if doc.Method != fiber.MethodGet {
		// A write takes its input from its path and body: a query
		// parameter it does not document (?dry_run=true) would be
		// ignored while the write goes ahead, so it is refused first.
		h = checkingQuery(doc, h)
	}
	handlers = append(handlers, h)
	if doc.Method == fiber.MethodGet {
		s.app.Get(doc.Path, handlers...)
	} else {
		s.app.Add(doc.Method, doc.Path, handlers...)
	}
	s.endpoints = append(s.endpoints, doc)
}

// serveMetrics serves GET /metrics from the registry.
func (s *Server) serveMetrics(c *fiber.Ctx) error { return s.metricsHTTP(c) }

// idempotencyScope is the store's scope of every Idempotency-Key record.
// Keys are per tenant, not per endpoint: a key reused on another endpoint
// finds the first record, whose fingerprint (method, path, body) differs,
// and is refused (422) instead of running a second operation.
const idempotencyScope = "tenant"

// idempotent runs a write through the Idempotency-Key machinery when the
// client sent the header; otherwise it just runs it.
func (s *Server) idempotent(c *fiber.Ctx, scope string, body []byte, run func() (int, any, error)) error {
	// fiber reads the first of several: which key the client meant cannot
	// be told, as with X-API-Key.
	sent := len(c.Request().Header.PeekAll("Idempotency-Key"))
	if sent > 1 {
		return problem.New(problem.BadRequest, "Idempotency-Key is given more than once: send one key")
	}
	key := c.Get("Idempotency-Key")
	// An empty header is a key the client meant to send and lost (an
	// unset variable): writing without one could write twice.
	if sent == 0 {
		status, data, err := run()
		if err != nil {
			return err
		}
		return respond(c, status, data)
	}
	if !idempotency.ValidKey(key) {
		return problem.Validation([]problem.FieldError{{Field: "Idempotency-Key", Code: problem.CodeFormat, Message: "Idempotency-Key must be 1-255 visible ASCII characters"}})
	}
	k := store.IdemKey{TenantID: tenant(c), Scope: idempotencyScope, Key: key}
	resp, replayed, err := s.idem.Do(ctx(c), k, idempotency.Fingerprint(c.Method(), c.Path(), scope, body), func() (idempotency.Response, error) {
		status, data, err := run()
		if err != nil {
			return idempotency.Response{}, err
		}
		b, err := envelope(c, data)
		if err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: status, Body: b}, nil
	})
	if err != nil {
		return err
	}
	if replayed {
		// The same data, in an envelope of this request: meta's request
		// id is unique per request and its timestamp is when this
		// response was made. The first request's id is in a header.
		var first struct {
			Data json.RawMessage `json:"data"`
			Meta Meta            `json:"meta"`
		}
		if json.Unmarshal(resp.Body, &first) == nil && first.Data != nil {
			b, err := envelope(c, first.Data)
			if err != nil {
				return err
			}
			resp.Body = b
			c.Set("Original-Request-Id", first.Meta.RequestID)
		}
		c.Set("Idempotent-Replayed", "true")
	}
	c.Status(resp.Status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(resp.Body)
}

// entityReserved are body keys of POST /v1/entities that are not fields.
var entityReserved = map[string]bool{"type": true, "id": true, "metadata": true, "data": true}

// refuseEnvelopeKeys refuses top-level body keys that name the entity's
// own properties (its id, type, tenant, version, times) where a request
// cannot set them: taken as fields they would be stored in data beside,
// and contradicting, the entity's own. A domain field of such a name is
// sent inside data, where it is unambiguous.
func refuseEnvelopeKeys(in *input, keys ...string) {
	for _, k := range keys {
		if _, ok := in.m[k]; ok {
			in.errs = append(in.errs, problem.FieldError{Field: k, Code: problem.CodeUnknownField,
				Message: k + " is the entity's own and cannot be set here; send a field of that name inside data"})
		}
	}
}

// entityFields gathers an entity body's fields: the members of "data" and
// the top-level members other than reserved ones. A field sent both ways
// is refused rather than one of its values kept.
func entityFields(in *input, reserved func(string) bool) map[string]any {
	data := in.object("data")
	fields := make(map[string]any, len(data)+len(in.m))
	for k, v := range data {
		fields[k] = v
	}
	for k, v := range in.m {
		if reserved(k) {
			continue
		}
		if _, twice := data[k]; twice {
			in.errs = append(in.errs, problem.FieldError{Field: "data." + k, Code: problem.CodeFormat,
				Message: k + " is sent both at the top level and in data; send it once"})
		}
		fields[k] = v
	}
	return fields
}

// createEntity: POST /v1/entities with {type, id?, metadata?, ...fields}.
// Fields may also be sent inside "data"; a field sent both ways is refused
// rather than one of its values kept.
func (s *Server) createEntity(c *fiber.Ctx) error {
	m, raw, err := readJSON(c)
	if err != nil {
		return err
	}
	in := &input{m: m}
	typ := in.str("type")
	entID := in.str("id")
	if v, ok := m["id"].(string); ok && v == "" {
		// Absent, an id is generated; empty, it is a mistake.
		in.errs = append(in.errs, problem.FieldError{Field: "id", Code: problem.CodeFormat, Message: "id must be 1-128 characters of letters, digits and _ . : -, or left out to have one generated"})
	}
	refuseEnvelopeKeys(in, "tenant_id", "version", "created_at", "updated_at")
	meta := in.object("metadata")
	fields := entityFields(in, func(k string) bool { return entityReserved[k] })
	if err := in.errWith(func() []problem.FieldError {
		errs, _ := s.platform.EntityInputErrors(platform.CreateEntityInput{Type: typ, ID: entID, Fields: fields})
		return errs
	}); err != nil {
		return err
	}
	return s.idempotent(c, "", raw, func() (int, any, error) {
		e, err := s.platform.CreateEntity(ctx(c), tenant(c), platform.CreateEntityInput{Type: typ, ID: entID, Fields: fields, Metadata: meta})
		if err != nil {
			return 0, nil, err
		}
		return fiber.StatusCreated, fiber.Map{"id": e.ID, "entity": platform.NewEntityView(e)}, nil
	})
}

func (s *Server) getEntity(c *fiber.Ctx) error {
	if err := checkQuery(c, "entity_type"); err != nil {
		return err
	}
	e, err := s.platform.GetEntity(ctx(c), tenant(c), Param(c, "id"), c.Query("entity_type"), readPolicy(c))
	if err != nil {
		return err
	}
	return respond(c, fiber.StatusOK, platform.NewEntityView(e))
}

// listReserved are query parameters of GET /v1/entities that are not
// field filters.
var listReserved = map[string]bool{"entity_type": true, "cursor": true, "limit": true}

func (s *Server) listEntities(c *fiber.Ctx) error {
	// Field filters are the type's own (the platform refuses unknown
	// ones); none may be given twice.
	if err := checkQuery(c, queryNames(c)...); err != nil {
		return err
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	filters := map[string]string{}
	for k, v := range c.Queries() {
		if !listReserved[k] {
			filters[k] = v
		}
	}
	if err := s.refuseNonFinite(c.Query("entity_type"), filters); err != nil {
		return err
	}
	page, err := s.platform.ListEntities(ctx(c), tenant(c), platform.ListEntitiesInput{
		Type: c.Query("entity_type"), Filters: filters, Cursor: c.Query("cursor"), Limit: limit,
	})
	if err != nil {
		return err
	}
	items := make([]platform.EntityView, len(page.Items))
	for i := range page.Items {
		items[i] = platform.NewEntityView(&page.Items[i])
	}
	return respond(c, fiber.StatusOK, listing(items, page.Cursor, page.HasMore))
}

// listing renders {items, cursor?, hasMore}.
func listing(items any, cursor string, hasMore bool) fiber.Map {
	m := fiber.Map{"items": items, "hasMore": hasMore}
	if cursor != "" {
		m["cursor"] = cursor
	}
	return m
}

// updateEntity: PATCH /v1/entities/:id with {version, entity_type?,
// metadata?, ...fields} as a JSON merge patch of the fields.
func (s *Server) updateEntity(c *fiber.Ctx) error {
	m, raw, err := readJSON(c)
	if err != nil {
		return err
	}
	in := &input{m: m}
	version := in.version("version")
	typ := in.str("entity_type")
	refuseEnvelopeKeys(in, "id", "type", "tenant_id", "created_at", "updated_at")
	meta := in.object("metadata")
	v, present := m["metadata"]
	clearMeta := present && v == nil
	patch := entityFields(in, func(k string) bool {
		return k == "version" || k == "entity_type" || k == "metadata" || k == "data"
	})
	if err := in.err(); err != nil {
		return err
	}
	if typ == "" {
		typ = c.Query("entity_type")
	}
	// Idempotency-Key is honoured: a retried patch answers as the first
	// did (not a 409 for the version it moved on), and a key used by
	// another request is a 422, as on every write that takes one. The
	// fingerprint's path names the entity; entity_type may be in the
	// query.
	return s.idempotent(c, c.Context().QueryArgs().String(), raw, func() (int, any, error) {
		e, err := s.platform.UpdateEntity(ctx(c), tenant(c), platform.UpdateEntityInput{ID: Param(c, "id"), Type: typ, ExpectedVersion: version, Patch: patch, Metadata: meta, ClearMetadata: clearMeta})
		if err != nil {
			return 0, nil, err
		}
		return fiber.StatusOK, platform.NewEntityView(e), nil
	})
}

func (s *Server) listEntityFacts(c *fiber.Ctx) error {
	if err := checkQuery(c, "cursor", "limit"); err != nil {
		return err
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	page, err := s.platform.ListEntityFacts(ctx(c), tenant(c), Param(c, "id"), c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]platform.FactView, len(page.Items))
	for i := range page.Items {
		items[i] = platform.NewFactView(&page.Items[i])
	}
	return respond(c, fiber.StatusOK, listing(items, page.Cursor, page.HasMore))
}

// appendFact: POST /v1/facts with {entity_id, type, subtype?, timestamp?,
// data?, source_id?, trace_id?, expected_version?}.
func (s *Server) appendFact(c *fiber.Ctx) error {
	m, raw, err := readJSON(c)
	if err != nil {
		return err
	}
	in := &input{m: m}
	in.only("entity_id", "type", "subtype", "timestamp", "data", "source_id", "trace_id", "expected_version")
	in.require("entity_id")
	in.require("type")
	in.positive("expected_version")
	in.positive("timestamp")
	fi := platform.AppendFactInput{
		EntityID:        in.str("entity_id"),
		Type:            in.str("type"),
		Subtype:         in.str("subtype"),
		SourceID:        in.str("source_id"),
		TraceID:         in.str("trace_id"),
		Timestamp:       in.timestamp("timestamp"),
		Data:            in.object("data"),
		ExpectedVersion: in.version("expected_version"),
	}
	if err := in.err(); err != nil {
		return err
	}
	if fi.TraceID == "" {
		fi.TraceID = traceID(c)
	}
	return s.idempotent(c, "", raw, func() (int, any, error) {
		f, err := s.platform.AppendFact(ctx(c), tenant(c), fi)
		if err != nil {
			return 0, nil, err
		}
		return fiber.StatusCreated, platform.NewFactView(f), nil
	})
}

func (s *Server) getFact(c *fiber.Ctx) error {
	if err := checkQuery(c); err != nil {
		return err
	}
	f, err := s.platform.GetFact(ctx(c), tenant(c), Param(c, "id"))
	if err != nil {
		return err
	}
	return respond(c, fiber.StatusOK, platform.NewFactView(f))
}

// listFactsParams are the query parameters of GET /v1/facts.
var listFactsParams = []string{"type", "subtype", "source_id", "entity_id", "from", "to", "cursor", "limit"}

// listFacts: GET /v1/facts lists the tenant's facts in commit order,
// entity-less ones (webhook audit facts) included. An unknown parameter
// is refused rather than ignored: a misspelt filter would list everything.
func (s *Server) listFacts(c *fiber.Ctx) error {
	if err := checkQuery(c, listFactsParams...); err != nil {
		return err
	}
	if err := refuseEmpty(c, "type", "subtype", "source_id", "entity_id", "from", "to"); err != nil {
		return err
	}
	if err := refuseHugeMillis(c, "from", "to"); err != nil {
		return err
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	q := func(name string) string { return strings.Clone(c.Query(name)) }
	page, err := s.platform.ListFacts(ctx(c), tenant(c), platform.ListFactsInput{
		Type: q("type"), Subtype: q("subtype"), SourceID: q("source_id"), EntityID: q("entity_id"),
		From: q("from"), To: q("to"), Cursor: q("cursor"), Limit: limit,
	})
	if err != nil {
		return err
	}
	items := make([]platform.FactView, len(page.Items))
	for i := range page.Items {
		items[i] = platform.NewFactView(&page.Items[i])
	}
	return respond(c, fiber.StatusOK, listing(items, page.Cursor, page.HasMore))
}

// configInput reads a config body; the returned input holds its shape
// errors.
func configInput(m map[string]any, creating bool) (platform.ConfigInput, *input, configAliases) {
	in := &input{m: m}
	allowed := []string{"name", "scope_type", "scope_id", "settings", "effective_at", "scope", "applies_to", "category"}
	if creating {
		allowed = append(allowed, "id", "type")
		in.require("type")
	} else {
		allowed = append(allowed, "version")
	}
	in.only(allowed...)
	in.require("settings")
	aliases := configAliases{}
	ci := platform.ConfigInput{
		ID:          in.str("id"),
		Type:        in.str("type"),
		Name:        in.str("name"),
		ScopeType:   in.aliased("scope_type", "scope", aliases),
		ScopeID:     in.aliased("scope_id", "applies_to", aliases),
		Settings:    in.object("settings"),
		EffectiveAt: in.integer("effective_at"),
	}
	if len(aliases) > 0 {
		// The request speaks the webhook document's names: a problem with
		// the other field names it that way too, unless it was sent by
		// the platform's name.
		for name, alias := range map[string]string{"scope_type": "scope", "scope_id": "applies_to"} {
			if _, sent := m[name]; !sent {
				aliases[name] = alias
			}
		}
	}
	if _, ok := m["category"]; ok {
		switch {
		case creating && ci.Type != "" && ci.Type != webhookConfigType:
			in.errs = append(in.errs, problem.FieldError{Field: "category", Code: problem.CodeUnknownField, Message: "category is a field of webhook configs"})
		case in.str("category") != webhookCategory:
			in.errs = append(in.errs, problem.FieldError{Field: "category", Code: problem.CodeEnum, Message: "category must be " + webhookCategory})
		}
	}
	if !creating {
		in.positive("version")
		ci.ExpectedVersion = in.version("version")
	}
	in.positive("effective_at")
	return ci, in, aliases
}

// The webhook document names a webhook config's scope `scope`, what it
// applies to `applies_to`, and gives it the category `logic`; the
// platform's config record names the first two scope_type and scope_id.
// A config takes either name of each.
const (
	webhookConfigType = "webhook"
	webhookCategory   = "logic"
)

// configAliases maps a config field's platform name to the other name the
// request used for it, so that problems name the field as it was sent.
type configAliases map[string]string

// named renames the field errors of err after the names the request used.
func (a configAliases) named(err error) error {
	var pe *problem.Error
	if len(a) == 0 || !errors.As(err, &pe) {
		return err
	}
	for i, fe := range pe.Errors {
		if alias, ok := a[fe.Field]; ok {
			pe.Errors[i].Field = alias
		}
	}
	return err
}

// aliased reads the string field name, or alias in its place (noting the
// alias in used); both given with different values is a format error.
func (in *input) aliased(name, alias string, used configAliases) string {
	_, hasName := in.m[name]
	_, hasAlias := in.m[alias]
	switch {
	case hasAlias && !hasName:
		used[name] = alias
		return in.str(alias)
	case hasAlias && hasName:
		v, a := in.str(name), in.str(alias)
		if v != a {
			in.errs = append(in.errs, problem.FieldError{Field: alias, Code: problem.CodeFormat,
				Message: fmt.Sprintf("%s and %s name the same field: give one, or the same value in both", alias, name)})
		}
		return v
	}
	return in.str(name)
}

func (s *Server) createConfig(c *fiber.Ctx) error {
	m, raw, err := readJSON(c)
	if err != nil {
		return err
	}
	ci, in, aliases := configInput(m, true)
	if err := in.errWith(func() []problem.FieldError {
		errs, _ := s.platform.ConfigInputErrors(ctx(c), tenant(c), "", ci)
		return errs
	}); err != nil {
		return aliases.named(err)
	}
	return s.idempotent(c, "", raw, func() (int, any, error) {
		cfg, err := s.platform.CreateConfig(ctx(c), tenant(c), ci)
		if err != nil {
			return 0, nil, aliases.named(err)
		}
		return fiber.StatusCreated, platform.NewConfigView(cfg), nil
	})
}

func (s *Server) getConfig(c *fiber.Ctx) error {
	if err := checkQuery(c); err != nil {
		return err
	}
	cfg, err := s.platform.GetConfig(ctx(c), tenant(c), Param(c, "id"))
	if err != nil {
		return err
	}
	return respond(c, fiber.StatusOK, platform.NewConfigView(cfg))
}

func (s *Server) updateConfig(c *fiber.Ctx) error {
	m, _, err := readJSON(c)
	if err != nil {
		return err
	}
	ci, in, aliases := configInput(m, false)
	if err := in.errWith(func() []problem.FieldError {
		errs, _ := s.platform.ConfigInputErrors(ctx(c), tenant(c), Param(c, "id"), ci)
		return errs
	}); err != nil {
		return aliases.named(err)
	}
	cfg, err := s.platform.UpdateConfig(ctx(c), tenant(c), Param(c, "id"), ci)
	if err != nil {
		return aliases.named(err)
	}
	return respond(c, fiber.StatusOK, platform.NewConfigView(cfg))
}

func (s *Server) archiveConfig(c *fiber.Ctx) error {
	cfg, err := s.platform.ArchiveConfig(ctx(c), tenant(c), Param(c, "id"))
	if err != nil {
		return err
	}
	return respond(c, fiber.StatusOK, platform.NewConfigView(cfg))
}

func (s *Server) configVersions(c *fiber.Ctx) error {
	if err := checkQuery(c); err != nil {
		return err
	}
	vs, err := s.platform.ConfigVersions(ctx(c), tenant(c), Param(c, "id"))
	if err != nil {
		return err
	}
	items := make([]platform.ConfigView, len(vs))
	for i := range vs {
		items[i] = platform.NewConfigView(&vs[i])
	}
	return respond(c, fiber.StatusOK, fiber.Map{"items": items})
}

func (s *Server) configVersion(c *fiber.Ctx) error {
	if err := checkQuery(c); err != nil {
		return err
	}
	v, err := c.ParamsInt("version")
	if errors.Is(err, strconv.ErrRange) {
		return problem.Validation([]problem.FieldError{{Field: "version", Code: problem.CodeRange, Message: "version is out of range: it must be a positive integer that fits in 64 bits"}})
	}
	if err != nil || v < 1 {
		return problem.Validation([]problem.FieldError{{Field: "version", Code: problem.CodeType, Message: "version must be a positive integer"}})
	}
	vs, err := s.platform.ConfigVersions(ctx(c), tenant(c), Param(c, "id"))
	if err != nil {
		return err
	}
	for i := range vs {
		if vs[i].Version == int64(v) {
			return respond(c, fiber.StatusOK, platform.NewConfigView(&vs[i]))
		}
	}
	return problem.Newf(problem.NotFound, "Config %s has no version %d", Param(c, "id"), v)
}

func (s *Server) listConfigs(c *fiber.Ctx) error {
	if err := checkQuery(c, "type", "status", "cursor", "limit"); err != nil {
		return err
	}
	if err := refuseEmpty(c, "type", "status"); err != nil {
		return err
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	page, err := s.platform.ListConfigs(ctx(c), tenant(c), c.Query("type"), c.Query("status"), c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]platform.ConfigView, len(page.Items))
	for i := range page.Items {
		items[i] = platform.NewConfigView(&page.Items[i])
	}
	return respond(c, fiber.StatusOK, listing(items, page.Cursor, page.HasMore))
}

// keyView never includes the key or its hash.
type keyView struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenant_id"`
	Mode      string `json:"mode"`
	Name      string `json:"name,omitempty"`
	Prefix    string `json:"prefix"`
	CreatedAt int64  `json:"created_at"`
	RevokedAt *int64 `json:"revoked_at"`
}

func newKeyView(k *store.APIKey) keyView {
	return keyView{ID: k.ID, TenantID: k.TenantID, Mode: k.Mode, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

func (s *Server) listKeys(c *fiber.Ctx) error {
	if err := checkQuery(c); err != nil {
		return err
	}
	keys, err := s.platform.Store().ListAPIKeys(ctx(c), tenant(c))
	if err != nil {
		return err
	}
	items := make([]keyView, len(keys))
	for i := range keys {
		items[i] = newKeyView(&keys[i])
	}
	return respond(c, fiber.StatusOK, fiber.Map{"items": items})
}

// createKey: POST /v1/admin/keys with {mode, name?} issues a key for the
// caller's tenant. The key is in the response once and never again.
func (s *Server) createKey(c *fiber.Ctx) error {
	m, _, err := readJSON(c)
	if err != nil {
		return err
	}
	in := &input{m: m}
	in.only("mode", "name")
	in.require("mode")
	mode, name := in.str("mode"), in.str("name")
	if mode != "" && !auth.ValidMode(mode) {
		in.errs = append(in.errs, problem.FieldError{Field: "mode", Code: problem.CodeEnum, Message: "mode must be one of live, test, admin"})
	}
	if utf8.RuneCountInString(name) > platform.MaxNameLength {
		in.errs = append(in.errs, problem.FieldError{Field: "name", Code: problem.CodeRange, Message: fmt.Sprintf("name must be at most %d characters", platform.MaxNameLength)})
	}
	if err := in.err(); err != nil {
		return err
	}
	key, rec, err := auth.CreateKey(ctx(c), s.platform.Store(), tenant(c), mode, name, time.Now())
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store") // the key is shown this once
	return respond(c, fiber.StatusCreated, fiber.Map{"key": key, "api_key": newKeyView(rec)})
}

// revokeKey revokes one of the tenant's keys and answers it as stored: a
// key revoked before keeps its first revoked_at.
func (s *Server) revokeKey(c *fiber.Ctx) error {
	id := Param(c, "id")
	find := func() (*store.APIKey, error) {
		keys, err := s.platform.Store().ListAPIKeys(ctx(c), tenant(c))
		if err != nil {
			return nil, err
		}
		for i := range keys {
			if keys[i].ID == id {
				return &keys[i], nil
			}
		}
		return nil, problem.Newf(problem.NotFound, "API key %s not found", id)
	}
	k, err := find()
	if err != nil {
		return err
	}
	if k.RevokedAt == nil {
		if err := s.auth.Revoke(ctx(c), k.ID); err != nil {
			return err
		}
		if k, err = find(); err != nil {
			return err
		}
	}
	return respond(c, fiber.StatusOK, newKeyView(k))
}
