package gateway

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
)

// entityParam picks the path parameter naming the entity: one called id,
// entityId or entity_id, else the only parameter there is.
func entityParam(r *manifest.Route, params map[string]string) (string, bool) {
	for _, name := range []string{"id", "entityId", "entity_id"} {
		if v, ok := params[name]; ok {
			return v, true
		}
	}
	if len(r.Params) == 1 {
		return params[r.Params[0]], true
	}
	return "", false
}

// actionEmit appends a fact of the route's factType. Input
// {entityId, factType, data} (entityId may come from the path; factType,
// when sent, must be the route's); subtype, timestamp and source_id are
// accepted too. Output {factId, seq, timestamp}, 201.
func (s *Server) actionEmit(c *fiber.Ctx, r *manifest.Route, params map[string]string) error {
	// The input is the body: a query string would be ignored.
	if err := checkQuery(c); err != nil {
		return err
	}
	m, raw, err := readJSON(c)
	if err != nil {
		return err
	}
	in := &input{m: m}
	in.only("entityId", "factType", "data", "subtype", "timestamp", "source_id")
	in.require("data")
	in.positive("timestamp")
	entityID, fromPath := entityParam(r, params)
	if !fromPath {
		in.require("entityId")
		entityID = in.str("entityId")
	} else if v := in.str("entityId"); v != "" && v != entityID {
		in.errs = append(in.errs, problem.FieldError{Field: "entityId", Code: problem.CodeEnum, Message: "entityId must match the entity in the path"})
	}
	if ft := in.str("factType"); ft != "" && ft != r.FactType {
		in.errs = append(in.errs, problem.FieldError{Field: "factType", Code: problem.CodeEnum, Message: "factType must be " + r.FactType + " on this route"})
	}
	fi := platform.AppendFactInput{
		EntityID:  entityID,
		Type:      r.FactType,
		Subtype:   in.str("subtype"),
		Timestamp: in.timestamp("timestamp"),
		SourceID:  in.str("source_id"),
		Data:      in.object("data"),
		TraceID:   traceID(c),
	}
	if err := in.err(); err != nil {
		return err
	}
	return s.idempotent(c, "", raw, func() (int, any, error) {
		// The route's entity type must be the entity's.
		if _, err := s.platform.GetEntity(ctx(c), tenant(c), entityID, r.Entity, platform.Cached); err != nil {
			return 0, nil, err
		}
		f, err := s.platform.AppendFact(ctx(c), tenant(c), fi)
		if err != nil {
			return 0, nil, err
		}
		return fiber.StatusCreated, fiber.Map{"factId": f.ID, "seq": f.Seq, "timestamp": f.Timestamp}, nil
	})
}

// actionGet returns the Entity object. It takes no query parameter (the
// route names the type): one sent would be ignored, so it is refused.
func (s *Server) actionGet(c *fiber.Ctx, r *manifest.Route, params map[string]string) error {
	if err := checkQuery(c); err != nil {
		return err
	}
	entityID, _ := entityParam(r, params)
	e, err := s.platform.GetEntity(ctx(c), tenant(c), entityID, r.Entity, readPolicy(c))
	if err != nil {
		return err
	}
	return respond(c, fiber.StatusOK, platform.NewEntityView(e))
}

// actionCreate creates an entity of the route's type from {type?, id?,
// data}. Output {id, entity}, 201.
func (s *Server) actionCreate(c *fiber.Ctx, r *manifest.Route) error {
	// The input is the body: a query string would be ignored.
	if err := checkQuery(c); err != nil {
		return err
	}
	m, raw, err := readJSON(c)
	if err != nil {
		return err
	}
	in := &input{m: m}
	in.only("type", "id", "data", "metadata")
	if t := in.str("type"); t != "" && t != r.Entity {
		in.errs = append(in.errs, problem.FieldError{Field: "type", Code: problem.CodeEnum, Message: "type must be " + r.Entity + " on this route"})
	}
	in.require("data")
	data := in.object("data")
	entID := in.str("id")
	meta := in.object("metadata")
	if err := in.errWith(func() []problem.FieldError {
		errs, _ := s.platform.EntityInputErrors(platform.CreateEntityInput{Type: r.Entity, ID: entID, Fields: prefixed(data)})
		return dataPrefixedFields(errs)
	}); err != nil {
		return err
	}
	return s.idempotent(c, "", raw, func() (int, any, error) {
		e, err := s.platform.CreateEntity(ctx(c), tenant(c), platform.CreateEntityInput{Type: r.Entity, ID: entID, Fields: prefixed(data), Metadata: meta})
		if err != nil {
			return 0, nil, dataPrefixed(err)
		}
		return fiber.StatusCreated, fiber.Map{"id": e.ID, "entity": platform.NewEntityView(e)}, nil
	})
}

func prefixed(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// dataPrefixed reports entity field errors under "data.", where the create
// action's input carries them.
func dataPrefixed(err error) error {
	pe := problem.From(err)
	if pe.Kind != problem.ValidationFailed {
		return err
	}
	dataPrefixedFields(pe.Errors)
	return pe
}

func dataPrefixedFields(errs []problem.FieldError) []problem.FieldError {
	for i := range errs {
		if errs[i].Field != "type" && errs[i].Field != "id" {
			errs[i].Field = "data." + errs[i].Field
			errs[i].Message = "data." + errs[i].Message
		}
	}
	return errs
}

// actionList lists entities of the route's type: query parameters cursor,
// limit and equality filters on indexed fields. As on GET /v1/entities,
// the platform refuses unknown filters and none may be given twice.
func (s *Server) actionList(c *fiber.Ctx, r *manifest.Route) error {
	if err := checkQuery(c, queryNames(c)...); err != nil {
		return err
	}
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	filters := map[string]string{}
	for k, v := range c.Queries() {
		if k != "cursor" && k != "limit" {
			filters[k] = v
		}
	}
	if err := s.refuseNonFinite(r.Entity, filters); err != nil {
		return err
	}
	page, err := s.platform.ListEntities(ctx(c), tenant(c), platform.ListEntitiesInput{Type: r.Entity, Filters: filters, Cursor: c.Query("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	items := make([]platform.EntityView, len(page.Items))
	for i := range page.Items {
		items[i] = platform.NewEntityView(&page.Items[i])
	}
	return respond(c, fiber.StatusOK, listing(items, page.Cursor, page.HasMore))
}

// actionQuery answers {projection, filters?} with {results, count}. The
// projection may come from a :projection path parameter; a GET without a
// body takes it and the filters from the query string
// (?projection=p&from=...&aggregate=true&data.currency=EUR).
func (s *Server) actionQuery(c *fiber.Ctx, r *manifest.Route, params map[string]string) error {
	m := map[string]any{}
	if c.Method() != fiber.MethodGet || len(c.Body()) > 0 {
		// The body carries the query; a query string beside it would be
		// ignored, so it is refused.
		var errs []problem.FieldError
		c.Context().QueryArgs().VisitAll(func(k, _ []byte) {
			errs = append(errs, problem.FieldError{Field: string(k), Code: problem.CodeUnknownField,
				Message: "a query with a body takes its projection and filters from the body, not the query string"})
		})
		if len(errs) > 0 {
			return problem.Validation(errs)
		}
		var err error
		if m, _, err = readJSON(c); err != nil {
			return err
		}
	} else {
		// Every parameter is the projection or a filter: unknown ones are
		// the filters' to refuse, one given twice is refused here.
		if err := checkQuery(c, slices.Collect(maps.Keys(c.Queries()))...); err != nil {
			return err
		}
		filters := map[string]any{}
		for k, v := range c.Queries() {
			if k == "projection" {
				m[k] = strings.Clone(v)
			} else {
				filters[strings.Clone(k)] = queryValue(v)
			}
		}
		if len(filters) > 0 {
			m["filters"] = filters
		}
	}
	if p, ok := params["projection"]; ok {
		if v, sent := m["projection"]; sent && v != p {
			return problem.Validation([]problem.FieldError{{Field: "projection", Code: problem.CodeEnum, Message: "projection must match the one in the path"}})
		}
		m["projection"] = p
	}
	in := &input{m: m}
	in.only("projection", "filters")
	in.require("projection")
	name := in.str("projection")
	filters := in.object("filters")
	if name == "" && len(in.errs) == 0 {
		in.errs = append(in.errs, problem.FieldError{Field: "projection", Code: problem.CodeRequired, Message: "projection is required"})
	}
	if err := in.err(); err != nil {
		return err
	}
	if s.projections == nil {
		return problem.Newf(problem.NotFound, "Projection %s not found", name)
	}
	results, meta, err := s.projections.Query(ctx(c), tenant(c), name, filters)
	if err != nil {
		if errors.Is(err, ErrUnknownProjection) {
			return problem.Newf(problem.NotFound, "Projection %s not found", name)
		}
		return err
	}
	if results == nil {
		results = []any{}
	}
	out := fiber.Map{"results": results, "count": len(results)}
	if meta != nil {
		out["_meta"] = meta
	}
	return respond(c, fiber.StatusOK, out)
}

// queryValue types a query-string filter value as its JSON twin would be:
// an integer as a number, true and false as booleans, else the text.
func queryValue(v string) any {
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return json.Number(v)
	}
	return strings.Clone(v)
}
