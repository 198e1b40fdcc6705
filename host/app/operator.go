package app

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/host/gateway"
	"github.com/factline/factline/host/problem"
	"github.com/factline/factline/host/stream"
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
//	GET /v1/admin/stream/history  the consumers' lag over the last hour, as this process sampled it
func (a *App) mountOperatorReads(srv *gateway.Server) {
	operator := func(h fiber.Handler) fiber.Handler {
		return func(c *fiber.Ctx) error {
			if gateway.Tenant(c) != a.cfg.OperatorTenant {
				return problem.Newf(problem.Forbidden, "This read is for admin keys of the operator tenant (%s)", a.cfg.OperatorTenant)
			}
			return h(c)
		}
	}
	srv.Mount(fiber.MethodGet, "/v1/admin/projections", gateway.AdminKey, operator(func(c *fiber.Ctx) error {
		return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": a.Projections.AllStatuses()})
	}))
	srv.Mount(fiber.MethodGet, "/v1/admin/stream/history", gateway.AdminKey, operator(func(c *fiber.Ctx) error {
		return gateway.Respond(c, fiber.StatusOK, fiber.Map{"interval_ms": a.lagEvery().Milliseconds(), "samples": a.LagHistory.Samples()})
	}))
}

func (a *App) lagEvery() time.Duration {
	if a.cfg.LagSampleInterval > 0 {
		return a.cfg.LagSampleInterval
	}
	return lagSampleEvery
}

// newLagHistory keeps an hour of samples at the configured interval.
func (a *App) newLagHistory() *stream.LagHistory {
	return stream.NewLagHistory(int(time.Hour / a.lagEvery()))
}
