package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/problem"
)

type checkResult struct {
	Status    string  `json:"status"`
	Detail    string  `json:"detail,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// health reports the store and every registered check, and each outside
// dependency (database, redis) as "up" or "down". It answers 200 while the
// critical checks pass (status "ok", or "degraded" when only a
// non-critical one fails) and a 503 problem naming the failing checks and
// the dependencies that are down otherwise.
func (s *Server) health(c *fiber.Ctx) error {
	checks := append([]HealthCheck{{
		Name:       "store",
		Critical:   true,
		Dependency: "database",
		Check: func(ctx context.Context) (string, error) {
			st := s.platform.Store()
			return st.Backend(), st.Ping(ctx)
		},
	}}, s.checks...)
	results := make(map[string]checkResult, len(checks))
	deps := map[string]string{}
	status := "ok"
	var failing, down []string
	for _, hc := range checks {
		cctx, cancel := context.WithTimeout(ctx(c), 2*time.Second)
		start := time.Now()
		detail, err := hc.Check(cctx)
		cancel()
		r := checkResult{Status: "ok", Detail: detail, LatencyMS: float64(time.Since(start).Microseconds()) / 1000}
		if hc.Dependency != "" && deps[hc.Dependency] != "down" {
			deps[hc.Dependency] = "up"
		}
		if err != nil {
			if hc.Dependency != "" {
				if deps[hc.Dependency] != "down" {
					down = append(down, hc.Dependency)
				}
				deps[hc.Dependency] = "down"
			}
			r.Status, r.Detail = "failing", err.Error()
			if hc.Critical {
				failing = append(failing, hc.Name)
			} else if status == "ok" {
				status = "degraded"
			}
		}
		results[hc.Name] = r
	}
	if len(failing) > 0 {
		detail := fmt.Sprintf("Unhealthy: %v", failing)
		if len(down) > 0 {
			detail += fmt.Sprintf("; down: %s", strings.Join(down, ", "))
		}
		return problem.New(problem.Unavailable, detail)
	}
	return respond(c, fiber.StatusOK, fiber.Map{
		"status":         status,
		"version":        s.cfg.Version,
		"uptime_seconds": int64(time.Since(s.started).Seconds()),
		"checks":         results,
		"dependencies":   deps,
	})
}

// readiness answers /ready: 200 once the plugins and the domain model are
// loaded, a 503 problem saying what is still loading before (with
// Retry-After), so a load balancer sends no traffic to a process whose
// ledgers would answer 503. /health stays the liveness check: it does not
// wait for plugins.
func (s *Server) readiness(c *fiber.Ctx) error {
	if s.ready != nil {
		if err := s.ready(); err != nil {
			return problem.New(problem.Unavailable, "Not ready: "+err.Error())
		}
	}
	return respond(c, fiber.StatusOK, fiber.Map{"status": "ready"})
}
