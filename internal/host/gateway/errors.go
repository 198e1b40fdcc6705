package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// unavailableRetryAfter is the Retry-After, in seconds, of every 503: long
// enough for a database failover or restart to be under way, short enough
// that clients come back soon after.
const unavailableRetryAfter = "5"

// handleError is the one place errors become responses.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	pe := s.toProblem(c, err)
	rid := requestID(c)
	if rid == "" {
		// fiber calls this directly for errors raised before middleware
		// runs (for example an oversized body).
		rid = newRequestID(c)
	}
	for k, v := range pe.Headers {
		c.Set(k, v)
	}
	if pe.Kind.Status == fiber.StatusServiceUnavailable && c.GetRespHeader(fiber.HeaderRetryAfter) == "" {
		c.Set(fiber.HeaderRetryAfter, unavailableRetryAfter)
	}
	if pe.Kind.Status == fiber.StatusMethodNotAllowed && c.GetRespHeader(fiber.HeaderAllow) == "" {
		if allow := s.allowedMethods(c.Path()); allow != "" {
			c.Set(fiber.HeaderAllow, allow)
		}
	}
	c.Status(pe.Kind.Status)
	if render := s.problemPage(c); render != nil {
		return render(c, pe.Body(s.cfg.DocsURL, rid))
	}
	b, merr := jsonMarshal(pe.Body(s.cfg.DocsURL, rid))
	if merr != nil {
		return merr
	}
	c.Set(fiber.HeaderContentType, problem.ContentType)
	return c.Send(b)
}

// problemPages renders the problems of requests under prefix as pages.
type problemPages struct {
	prefix string
	render func(c *fiber.Ctx, p problem.Body) error
}

// ProblemPages has every problem answered to a browser under prefix (a
// request that accepts text/html, or an htmx request) rendered by render
// instead of as problem+json: a page the user can read and leave, for the
// refusals that come before any page handler runs (no session, a bad
// CSRF token, an oversized body, an unknown path). The status and headers
// (Retry-After, Allow) are set before render runs. Register before
// serving.
func (s *Server) ProblemPages(prefix string, render func(c *fiber.Ctx, p problem.Body) error) {
	s.pages = append(s.pages, problemPages{prefix: strings.TrimSuffix(prefix, "/"), render: render})
}

// problemPage returns the renderer for c's problem, or nil for JSON.
func (s *Server) problemPage(c *fiber.Ctx) func(c *fiber.Ctx, p problem.Body) error {
	if len(s.pages) == 0 {
		return nil
	}
	if !AsksForHTML(c.Get(fiber.HeaderAccept)) && c.Get("HX-Request") != "true" {
		return nil
	}
	path := c.Path()
	for _, p := range s.pages {
		if path == p.prefix || strings.HasPrefix(path, p.prefix+"/") {
			return p.render
		}
	}
	return nil
}

// toProblem maps any error to a problem: ours pass through, fiber's keep
// their status with our catalogue's slug and title, and a database that
// cannot be reached is a 503 wherever it surfaced (auth, reads, writes),
// even when a layer on the way took it for a timeout or an internal error.
func (s *Server) toProblem(c *fiber.Ctx, err error) *problem.Error {
	// A write whose commit went unanswered may be stored: the answer
	// must not read as "it failed, send it again", also when a layer on
	// the way named it a timeout or an outage.
	var named *problem.Error
	if errors.Is(err, store.ErrOutcomeUnknown) && (!errors.As(err, &named) || named.Kind.Status >= 500) {
		kind := problem.Unavailable
		if !errors.Is(err, store.ErrUnavailable) && errors.Is(err, context.DeadlineExceeded) {
			kind = problem.Timeout
		}
		return problem.Wrap(kind, "The database did not confirm the write, so it may or may not be stored; "+
			"check whether it was before sending it again", err)
	}
	// A value the store cannot hold is the client's input, whoever
	// wrapped the store's error on the way.
	var ie *store.InvalidInputError
	if errors.As(err, &ie) {
		pe := problem.Validation([]problem.FieldError{invalidField(ie)})
		pe.Err = err
		return pe
	}
	var pe *problem.Error
	found := errors.As(err, &pe)
	if errors.Is(err, store.ErrUnavailable) && (!found || pe.Kind.Status >= 500) {
		if found && pe.Kind == problem.Unavailable {
			return pe
		}
		if errors.Is(err, store.ErrReadOnly) {
			return problem.Wrap(problem.Unavailable, "The database takes no writes now; retry in a few seconds", err)
		}
		return problem.Wrap(problem.Unavailable, "The database is not answering; retry in a few seconds", err)
	}
	if found {
		return pe
	}
	var te transportError
	if errors.As(err, &te) {
		// fasthttp's own texts name its parser's internals: say what was
		// wrong in the product's words and keep the cause for the log.
		var small *fasthttp.ErrSmallBuffer
		var ne net.Error
		switch {
		case errors.As(err, &small):
			return problem.Wrap(problem.HeadersTooLarge, fmt.Sprintf("Request line and headers exceed the limit of %d bytes", headerLimit), err)
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			return s.bodyTooLarge(c)
		case errors.As(err, &ne) && ne.Timeout():
			return problem.Wrap(problem.RequestTimeout, "The request took too long to arrive", err)
		}
		return problem.Wrap(problem.BadRequest, "The request is not well-formed HTTP/1.1", err)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound, fiber.StatusMethodNotAllowed:
			return s.routeMiss(c)
		case fiber.StatusRequestEntityTooLarge:
			return s.bodyTooLarge(c)
		case fiber.StatusRequestTimeout:
			return problem.New(problem.ForStatus(fe.Code), "The request took too long to arrive")
		}
		k := problem.ForStatus(fe.Code)
		if fe.Code >= 500 {
			return problem.Wrap(k, "An internal error occurred; quote the trace_id when reporting it", err)
		}
		return problem.Wrap(k, fe.Message, err)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// A deadline some layer did not name (claiming an
		// Idempotency-Key, say) is the request's overrun all the same.
		return problem.Wrap(problem.Timeout, "The request took too long and was abandoned", err)
	case errors.Is(err, context.Canceled) && ctx(c).Err() != nil:
		// The request's own context ends early only when the server
		// stops (a client that went away reads no answer): the work
		// stopped before it finished, and a write stopped before its
		// commit is rolled back (one stopped while committing is in
		// doubt, above). A cancellation from elsewhere (a store being
		// closed) stays an internal error.
		c.Set(fiber.HeaderConnection, "close")
		return problem.Wrap(problem.Unavailable, "The server is shutting down and stopped this request before it finished; retry", err)
	}
	return problem.From(err)
}

// routeMiss is the answer to a method and path no route serves: 405 when
// the path is served for other methods (handleError adds Allow), else 404.
func (s *Server) routeMiss(c *fiber.Ctx) *problem.Error {
	if s.allowedMethods(c.Path()) != "" {
		return problem.Newf(problem.MethodNotAllowed, "Method %s is not allowed on %s", c.Method(), c.Path())
	}
	// A stored domain change not applied here yet may add the route.
	if pe := s.platform.ModelUpdating("No route matches " + c.Method() + " " + c.Path() + " yet"); pe != nil {
		return pe
	}
	return problem.Newf(problem.NotFound, "No route matches %s %s", c.Method(), c.Path())
}

func (s *Server) bodyTooLarge(c *fiber.Ctx) *problem.Error {
	limit := s.cfg.BodyLimit
	if isUpload(c.Path()) {
		limit = max(s.cfg.BodyLimit, s.cfg.UploadLimit)
	}
	return problem.Newf(problem.PayloadTooLarge, "Request body exceeds the limit of %d bytes", limit)
}

// allowedMethods lists the methods registered for a path (platform,
// mounted and manifest routes), for the Allow header of a 405.
func (s *Server) allowedMethods(path string) string {
	_, methods := s.table.Load().match("", path, map[string]string{})
	// One leading slash and one trailing (fiber routes ignore it) go;
	// an empty segment left over ("//v1/facts") matches no route, as it
	// matched none in fiber.
	xs := strings.Split(strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/"), "/")
	for _, r := range s.routePatterns() {
		if matchSegments(r.segments, xs) && !contains(methods, r.method) {
			methods = append(methods, r.method)
		}
	}
	// Every GET route answers HEAD too.
	if i := slices.Index(methods, fiber.MethodGet); i >= 0 && !contains(methods, fiber.MethodHead) {
		methods = slices.Insert(methods, i+1, fiber.MethodHead)
	}
	return strings.Join(methods, ", ")
}

// routePatterns are the fiber routes allowedMethods matches a path
// against (HEAD, CONNECT and middleware left out), their patterns split
// into segments.
type routePatterns struct {
	handlers uint32 // the app's handler count they were read at
	routes   []routePattern
}

type routePattern struct {
	method   string
	segments []string
}

// routePatterns returns the app's routes for allowedMethods. Every command
// request asks, and copying fiber's route table each time cost more than
// the rest of the check, so they are read again only when a route has
// been added since (the handler count moved).
func (s *Server) routePatterns() []routePattern {
	n := s.app.HandlersCount()
	if p := s.patterns.Load(); p != nil && p.handlers == n {
		return p.routes
	}
	var rs []routePattern
	for _, r := range s.app.GetRoutes(true) {
		if r.Method == fiber.MethodHead || r.Method == fiber.MethodConnect || r.Method == "USE" {
			continue
		}
		rs = append(rs, routePattern{method: r.Method, segments: strings.Split(strings.Trim(r.Path, "/"), "/")})
	}
	s.patterns.Store(&routePatterns{handlers: n, routes: rs})
	return rs
}

// matchSegments matches the segments of a fiber route pattern with
// :params against those of a path.
func matchSegments(ps, xs []string) bool {
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], ":") {
			if xs[i] == "" {
				return false
			}
			continue
		}
		if ps[i] != xs[i] {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// AsksForHTML reports whether an Accept header prefers text/html: it
// names text/html with a quality above zero and at least that of any
// other type it names. A browser asks for a page so; a wildcard alone
// (curl's */*) does not ask for HTML.
func AsksForHTML(accept string) bool {
	html, other := 0.0, 0.0
	for _, r := range strings.Split(accept, ",") {
		media, params, _ := strings.Cut(r, ";")
		media = strings.ToLower(strings.TrimSpace(media))
		if media == "" || strings.HasSuffix(media, "/*") {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if media == "text/html" {
			html = max(html, q)
		} else {
			other = max(other, q)
		}
	}
	return html > 0 && html >= other
}
