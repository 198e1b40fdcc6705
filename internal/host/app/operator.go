package app

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/host/subscription"
)

// Lag history: one sample every lagSampleEvery, the last hour.
const (
	lagSampleEvery = 5 * time.Second
	lagSamples     = 720
)

// mountOperatorReads registers reads that span every tenant, for admin
// keys of the operator tenant only:
//
//	GET /v1/admin/projections     every tenant's projections and readiness
//	GET /v1/admin/stream          the fact stream's head and every consumer's position and lag
//	GET /v1/admin/stream/history  the consumers' lag over the last hour, as this process sampled it
func (a *App) mountOperatorReads(srv *gateway.Server) {
	for _, r := range a.operatorRoutes() {
		srv.Mount(r.Doc, r.Handler)
	}
}

func (a *App) operatorRoutes() []gateway.Route {
	operator := func(h fiber.Handler) fiber.Handler {
		return func(c *fiber.Ctx) error {
			if gateway.Tenant(c) != a.cfg.OperatorTenant {
				return problem.Newf(problem.Forbidden, "This read is for admin keys of the operator tenant (%s)", a.cfg.OperatorTenant)
			}
			return h(c)
		}
	}
	return []gateway.Route{
		{Handler: operator(a.streamStatus), Doc: openapi.Endpoint{Method: fiber.MethodGet, Path: "/v1/admin/stream", ID: "getStreamStatus", Tag: openapi.TagAdmin, Access: openapi.AdminKey,
			Summary: "Fact stream status",
			Description: "The fact stream's head and each durable consumer's position and lag. The stream and its consumers " +
				"(every tenant's projections among them) span every tenant. Needs an admin key of the operator tenant.",
			Status: fiber.StatusOK, OK: "The stream's status.", Data: openapi.Ref("StreamStatus")}},
		{Handler: operator(func(c *fiber.Ctx) error {
			return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": a.Projections.AllStatuses()})
		}), Doc: openapi.Endpoint{Method: fiber.MethodGet, Path: "/v1/admin/projections", ID: "listAllProjections", Tag: openapi.TagAdmin, Access: openapi.AdminKey,
			Summary:     "Every tenant's projections",
			Description: "Each tenant's projections, their versions and whether they have caught up with the fact stream. Needs an admin key of the operator tenant.",
			Status:      fiber.StatusOK, OK: "The projections.",
			Data: openapi.List("The projections.", "", openapi.FreeObject("A projection's state, as GET /v1/projections shows it, with its tenant."))}},
		{Handler: operator(func(c *fiber.Ctx) error {
			return gateway.Respond(c, fiber.StatusOK, fiber.Map{"interval_ms": a.lagEvery().Milliseconds(), "samples": a.LagHistory.Samples()})
		}), Doc: openapi.Endpoint{Method: fiber.MethodGet, Path: "/v1/admin/stream/history", ID: "getStreamHistory", Tag: openapi.TagAdmin, Access: openapi.AdminKey,
			Summary:     "Fact stream lag over the last hour",
			Description: "The stream consumers' lag as this process sampled it over the last hour. Needs an admin key of the operator tenant.",
			Status:      fiber.StatusOK, OK: "The samples.",
			Data: openapi.Object("Lag samples.", []string{"interval_ms", "samples"}, false,
				openapi.Prop{Name: "interval_ms", Schema: openapi.Integer("Milliseconds between samples.")},
				openapi.Prop{Name: "samples", Schema: openapi.Array("Oldest first: when, the stream's head and each consumer's lag.", openapi.FreeObject(""))},
			)}},
	}
}

func (a *App) lagEvery() time.Duration {
	if a.cfg.LagSampleInterval > 0 {
		return a.cfg.LagSampleInterval
	}
	return lagSampleEvery
}

// newLagHistory keeps an hour of samples at the configured interval.
func (a *App) newLagHistory() *stream.LagHistory {
	return stream.NewLagHistory(int(time.Hour/a.lagEvery()), a.consumerDeclared)
}

// consumerDeclared reports whether the served model still has the stream
// consumer named: a subscription no longer declared keeps its checkpoint
// (declaring it again goes on from there) but nothing reads for it.
// Projections delete theirs when retired; the webhook matcher always runs.
func (a *App) consumerDeclared(name string) bool {
	sub, ok := strings.CutPrefix(name, subscription.ConsumerName(""))
	if !ok {
		return true
	}
	return slices.ContainsFunc(a.Platform.Domain().Subscriptions, func(s manifest.Subscription) bool { return s.Name == sub })
}

// streamStatus answers the stream's head and each consumer's checkpoint and
// lag, by consumer name.
func (a *App) streamStatus(c *fiber.Ctx) error {
	ctx := gateway.Context(c)
	head, err := a.Store.HeadPosition(ctx)
	if err != nil {
		return err
	}
	cps, err := a.Store.ListCheckpoints(ctx)
	if err != nil {
		return err
	}
	// A declared subscription that has not saved a position yet (it has
	// read nothing, or its handler is not served) reads from the start.
	if cps == nil {
		cps = map[string]int64{}
	}
	for _, sub := range a.Platform.Domain().Subscriptions {
		if name := subscription.ConsumerName(sub.Name); cps[name] == 0 {
			cps[name] = 0 // listed even before it has saved a position
		}
	}
	names := slices.Sorted(maps.Keys(cps))
	consumers := make([]fiber.Map, 0, len(names))
	for _, name := range names {
		consumers = append(consumers, fiber.Map{"name": name, "metric_label": stream.MetricLabel(name), "position": cps[name], "lag": head - cps[name], "declared": a.consumerDeclared(name)})
	}
	return gateway.Respond(c, fiber.StatusOK, fiber.Map{"head": head, "consumers": consumers})
}
