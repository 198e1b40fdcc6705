package gateway

import (
	"encoding/json"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// Bounds on a ledger command's input, checked by the host before the
// plugin is called: the body in bytes, the nesting of objects and arrays
// (the body object is level 1), and object keys at all levels.
const (
	CommandInputLimit = 256 << 10
	CommandInputDepth = 32
	CommandInputKeys  = 1000
)

// entityCommand serves the routes ledgers declare for their entities,
// mounted as <method> /v1/entities/:id/<path> (for example
// POST /v1/entities/:id/deposit). A write answers 201 with the recorded
// fact (or {facts} when a command records several); a read-only command
// answers 200 with its result.
func (s *Server) entityCommand(c *fiber.Ctx) error {
	// The platform's own paths below /v1/entities/:id (the entity, its
	// facts) are never commands (plugins may not declare them): a method
	// they do not serve is a 405, whatever the entity.
	if s.allowedMethods(c.Path()) != "" {
		return s.routeMiss(c)
	}
	// A parameter given twice (the input of a GET, entity_type) would
	// count once, fiber choosing which.
	if err := checkQuery(c, queryNames(c)...); err != nil {
		return err
	}
	entityID := Param(c, "id")
	path := "/" + strings.Trim(Param(c, "*"), "/")
	// The type comes from the stored entity; ?entity_type= names it up
	// front, as on GET /v1/entities/:id, so an unknown type is the
	// contract's 400 whether or not the entity exists.
	hint := c.Query("entity_type")
	var e *store.Entity
	var err error
	if hint != "" {
		e, err = s.platform.GetEntity(ctx(c), tenant(c), entityID, hint, platform.Cached)
	} else {
		e, err = s.platform.LoadEntity(ctx(c), tenant(c), entityID)
	}
	if err != nil {
		return err
	}
	// A stored entity whose type the domain no longer declares (the
	// manifest was reloaded without it) has no ledger to run commands.
	if err := s.platform.CheckStoredType(e); err != nil {
		return err
	}
	// A read-only GET command answers HEAD too, as every GET route does;
	// one that writes does not: HEAD must change nothing.
	head := c.Method() == fiber.MethodHead
	method := c.Method()
	if head {
		method = fiber.MethodGet
	}
	cmd, ok := s.platform.FindCommand(e.Type, method, path)
	if !ok || head && !cmd.ReadOnly {
		var allow []string
		for _, other := range s.platform.Commands(e.Type) {
			if other.Path == path {
				allow = append(allow, other.Method)
				if other.Method == fiber.MethodGet && other.ReadOnly {
					allow = append(allow, fiber.MethodHead)
				}
			}
		}
		if len(allow) > 0 {
			c.Set(fiber.HeaderAllow, strings.Join(allow, ", "))
			return problem.Newf(problem.MethodNotAllowed, "Method %s is not allowed on %s", c.Method(), c.Path())
		}
		// A ledger plugin still loading lists no commands yet: the path
		// may be one of them, so a 503 to retry rather than a 404.
		if err := s.platform.LedgerNotReady(e.Type); err != nil {
			return err
		}
		return problem.Newf(problem.NotFound, "No route matches %s %s", c.Method(), c.Path())
	}
	return s.runCommand(c, e, cmd, hint, nil, "entity_type")
}

// actionCommand serves a manifest route of action command: the ledger
// command the route names, on the entity its :id parameter names, like
// entityCommand. The other path parameters join the input and win over
// body members of the same name (the path is what the route promises).
func (s *Server) actionCommand(c *fiber.Ctx, r *manifest.Route, params map[string]string) error {
	if err := checkQuery(c, queryNames(c)...); err != nil {
		return err
	}
	entityID := params["id"]
	e, err := s.platform.GetEntity(ctx(c), tenant(c), entityID, r.Entity, platform.Cached)
	if err != nil {
		return err
	}
	cmd, ok := s.platform.CommandNamed(r.Entity, r.Command)
	if !ok {
		// The ledger plugin is not loaded here yet (or is being replaced
		// by a version without the command): like a type awaiting its
		// plugin, a 503 to retry.
		pe := problem.Newf(problem.Unavailable, "The %s command of entity type %s is not available yet; retry in a few seconds", r.Command, r.Entity)
		pe.Headers = map[string]string{"Retry-After": "5"}
		return pe
	}
	extra := map[string]any{}
	for k, v := range params {
		if k != "id" {
			extra[k] = v
		}
	}
	return s.runCommand(c, e, cmd, "", extra)
}

// runCommand reads a command's input from the request (the query string
// of a GET or DELETE or of a bodiless read, else the JSON body), adds
// extra members and runs it: the one command path of entityCommand and
// actionCommand. A command whose input is the body refuses query
// parameters other than bodyQuery: they would be ignored.
func (s *Server) runCommand(c *fiber.Ctx, e *store.Entity, cmd ledger.CommandSpec, hint string, extra map[string]any, bodyQuery ...string) error {
	entityID := e.ID
	var input []byte
	var err error
	var raw []byte
	if m := c.Method(); m == fiber.MethodGet || m == fiber.MethodHead || m == fiber.MethodDelete || len(c.Body()) == 0 && cmd.ReadOnly {
		q := map[string]any{}
		for k, v := range c.Queries() {
			if k != "entity_type" || hint == "" {
				q[k] = v
			}
		}
		for k, v := range extra {
			q[k] = v
		}
		if len(q) > CommandInputKeys {
			return problem.Newf(problem.BadRequest, "Command input has more than %d keys", CommandInputKeys)
		}
		input, _ = json.Marshal(q)
	} else {
		if err := checkQuery(c, bodyQuery...); err != nil {
			return err
		}
		// The input is bounded here, before the plugin is called, so an
		// oversized one costs a quick refusal instead of the plugin's
		// deadline.
		if len(c.Body()) > CommandInputLimit {
			return problem.Newf(problem.PayloadTooLarge, "Command input exceeds the limit of %d bytes", CommandInputLimit)
		}
		var m map[string]any
		var shape store.Shape
		if m, raw, shape, err = readJSONShape(c); err != nil {
			return err
		}
		switch {
		case shape.Depth > CommandInputDepth:
			return problem.Newf(problem.BadRequest, "Command input nests deeper than %d levels", CommandInputDepth)
		case shape.Keys > CommandInputKeys:
			return problem.Newf(problem.BadRequest, "Command input has more than %d keys", CommandInputKeys)
		}
		if len(extra) > 0 && m == nil {
			m = map[string]any{}
		}
		for k, v := range extra {
			m[k] = v
		}
		input = mustMarshal(m)
	}
	run := func() (int, any, error) {
		// e was read just now to find the command; the platform decides
		// on it rather than reading the entity again.
		out, err := s.platform.RunCommandOn(ctx(c), tenant(c), e, cmd.Name, input, platform.Provenance{TraceID: traceID(c)})
		if err != nil {
			return 0, nil, err
		}
		if len(out.Facts) == 0 {
			result := out.Result
			if len(result) == 0 {
				result = json.RawMessage("null")
			}
			return fiber.StatusOK, result, nil
		}
		if len(out.Facts) == 1 {
			return fiber.StatusCreated, platform.NewFactView(&out.Facts[0]), nil
		}
		views := make([]platform.FactView, len(out.Facts))
		for i := range out.Facts {
			views[i] = platform.NewFactView(&out.Facts[i])
		}
		return fiber.StatusCreated, fiber.Map{"facts": views}, nil
	}
	if cmd.ReadOnly {
		status, data, err := run()
		if err != nil {
			return err
		}
		return respond(c, status, data)
	}
	scope := entityID
	if len(extra) > 0 {
		scope += "\n" + string(mustMarshal(extra))
	}
	return s.idempotent(c, scope, raw, run)
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("{}")
	}
	return b
}
