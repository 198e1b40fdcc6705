package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/host/tracing"
)

const localRoutePattern = "factline.route"

// RateLimiter is what the gateway needs of a limiter; internal/host/ratelimit
// implements it for Redis and in-process.
type RateLimiter interface {
	Allow(ctx context.Context, key string, rpm int) (ratelimit.Decision, error)
}

// Projections answers the query action (internal/host/projector implements it).
type Projections interface {
	// Query returns the result rows of a tenant's projection and the meta
	// the data object carries under "_meta" (nil for none), or an error:
	// a problem (*problem.Error) is answered as is, ErrUnknownProjection
	// with the 404 of an unknown projection.
	Query(ctx context.Context, tenant, projection string, filters map[string]any) ([]any, map[string]any, error)
}

// ErrUnknownProjection is returned by Projections for a name it does not
// know.
var ErrUnknownProjection = errors.New("unknown projection")

// SetRoutes swaps the manifest's route table atomically; requests in flight
// finish on the table they started with. A nil manifest removes every
// manifest route.
func (s *Server) SetRoutes(gw *manifest.Gateway) {
	s.table.Store(compileTable(gw))
}

// Routes returns the manifest currently served (nil when none).
func (s *Server) Routes() *manifest.Gateway { return s.table.Load().manifest }

// dispatch serves every request no platform route took: it matches the
// manifest's routes in declaration order, then authenticates, rate-limits,
// validates and runs the route's action, in the contract's order.
func (s *Server) dispatch(c *fiber.Ctx) error {
	params := map[string]string{}
	r, _ := s.table.Load().match(c.Method(), c.Path(), params)
	if r == nil {
		// Not a manifest route: endpoints mounted later may serve it;
		// otherwise fiber's 404 reaches the error handler, which answers
		// 404 or, when the path exists for other methods, 405.
		return c.Next()
	}
	for k, v := range params {
		params[k] = strings.Clone(v) // request memory is reused after the handler
	}
	c.Locals(localRoutePattern, r.Path)
	if r.Auth != manifest.AuthPublic {
		if err := s.authenticate(c); err != nil {
			return err
		}
	}
	if r.RateLimit != nil {
		if err := s.limit(c, r.Route); err != nil {
			return err
		}
	}
	return s.runAction(c, r.Route, params)
}

// limit applies the route's rate limit and sets the RateLimit headers.
func (s *Server) limit(c *fiber.Ctx, r *manifest.Route) error {
	if s.limiter == nil {
		return nil
	}
	key := "route:" + r.ID()
	if r.RateLimit.Scope == manifest.ScopeTenant {
		if p := principal(c); p != nil {
			key += ":tenant:" + p.TenantID
		} else {
			// A public route has no tenant: count per client address.
			key += ":ip:" + c.IP()
		}
	}
	lctx, span := tracing.Start(ctx(c), s.tracer, "ratelimit.allow")
	d, err := s.limiter.Allow(lctx, key, r.RateLimit.RPM)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("ratelimit.key", key), attribute.Bool("ratelimit.allowed", err == nil && d.Allowed))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
	if err != nil {
		return problem.Wrap(problem.Unavailable, "Rate limiting is temporarily unavailable", err)
	}
	c.Set("RateLimit-Limit", strconv.Itoa(d.Limit))
	if !d.Uncounted {
		// Failing open, nothing was counted: claiming an allowance
		// left would be made up.
		c.Set("RateLimit-Remaining", strconv.Itoa(d.Remaining))
		c.Set("RateLimit-Reset", strconv.Itoa(ceilSeconds(d.ResetAfter)))
	}
	if !d.Allowed {
		pe := problem.Newf(problem.RateLimitExceeded, "Rate limit exceeded: %d requests per minute", r.RateLimit.RPM)
		pe.Headers = map[string]string{"Retry-After": strconv.Itoa(max(1, ceilSeconds(d.RetryAfter)))}
		return pe
	}
	return nil
}

func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

func (s *Server) runAction(c *fiber.Ctx, r *manifest.Route, params map[string]string) error {
	if r.Entity == manifest.SystemEntity {
		// A get route of the system entity takes no parameter: one
		// sent would be ignored.
		if err := checkQuery(c); err != nil {
			return err
		}
		return respond(c, fiber.StatusOK, fiber.Map{"name": s.manifestName(), "version": s.cfg.Version, "status": "ok"})
	}
	switch r.Action {
	case manifest.ActionEmit:
		return s.actionEmit(c, r, params)
	case manifest.ActionGet:
		return s.actionGet(c, r, params)
	case manifest.ActionCreate:
		return s.actionCreate(c, r)
	case manifest.ActionList:
		return s.actionList(c, r)
	case manifest.ActionQuery:
		return s.actionQuery(c, r, params)
	case manifest.ActionCommand:
		return s.actionCommand(c, r, params)
	}
	return fmt.Errorf("gateway: route %s has unknown action %q", r.ID(), r.Action)
}

func (s *Server) manifestName() string {
	if gw := s.Routes(); gw != nil {
		return gw.Name
	}
	return "factline"
}
