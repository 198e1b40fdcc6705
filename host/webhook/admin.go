package webhook

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/host/gateway"
	"github.com/factline/factline/host/problem"
	"github.com/factline/factline/host/store"
)

// Admin endpoints, all behind an admin API key and scoped to its tenant
// (README.md documents each):
//
//	POST /v1/admin/webhooks/secrets                        create a signing secret (201, shown once)
//	POST /v1/admin/webhooks/configs/:id/rotate-secret      rotate a config's secret (201, shown once)
//	POST /v1/admin/webhooks/configs/:id/pause              pause a config's deliveries (200)
//	POST /v1/admin/webhooks/configs/:id/resume             resume a paused config (200)
//	GET  /v1/admin/webhooks/paused                         list the paused configs (200)
//	GET  /v1/admin/webhooks/dead-letters                   list dead letters (200; config_id, limit, cursor)
//	POST /v1/admin/webhooks/dead-letters/:delivery_id/replay  replay a dead delivery (200)
//	POST /v1/admin/webhooks/dead-letters/replay            replay every dead delivery (200; body {config_id?})
//	GET  /v1/admin/webhooks/deliveries                     list deliveries (200; status, config_id, from, to, limit, cursor)
//	GET  /v1/admin/webhooks/deliveries/:delivery_id        one delivery's state (200)
//
// and read-only ones any key of the tenant may call (the endpoint-owner
// portal of live and test keys; /v1/admin/* stays admin-only):
//
//	GET  /v1/webhooks/deliveries                           as the admin listing
//	GET  /v1/webhooks/deliveries/:delivery_id              as the admin read
//	GET  /v1/webhooks/deliveries/stats                     attempts, success ratio, p50/p99 response time over time (from, to, buckets)
const (
	adminPrefix = "/v1/admin/webhooks"
	readPrefix  = "/v1/webhooks"
)

// Mount adds the admin endpoints to the gateway.
func (s *Service) Mount(srv *gateway.Server) {
	srv.Mount(fiber.MethodPost, adminPrefix+"/secrets", gateway.AdminKey, s.handleCreateSecret)
	srv.Mount(fiber.MethodPost, adminPrefix+"/configs/:id/rotate-secret", gateway.AdminKey, s.handleRotate)
	srv.Mount(fiber.MethodPost, adminPrefix+"/configs/:id/pause", gateway.AdminKey, s.handlePause)
	srv.Mount(fiber.MethodPost, adminPrefix+"/configs/:id/resume", gateway.AdminKey, s.handleResume)
	srv.Mount(fiber.MethodGet, adminPrefix+"/paused", gateway.AdminKey, s.handlePaused)
	srv.Mount(fiber.MethodGet, adminPrefix+"/dead-letters", gateway.AdminKey, s.handleDeadLetters)
	srv.Mount(fiber.MethodPost, adminPrefix+"/dead-letters/:delivery_id/replay", gateway.AdminKey, s.handleReplay)
	srv.Mount(fiber.MethodPost, adminPrefix+"/dead-letters/replay", gateway.AdminKey, s.handleReplayAll)
	srv.Mount(fiber.MethodGet, adminPrefix+"/deliveries", gateway.AdminKey, s.handleDeliveries)
	srv.Mount(fiber.MethodGet, adminPrefix+"/deliveries/:delivery_id", gateway.AdminKey, s.handleDelivery)
	// The same handlers: reading a tenant's deliveries is no admin act.
	// Before /:delivery_id: a delivery id starts with del_, never "stats".
	srv.Mount(fiber.MethodGet, readPrefix+"/deliveries/stats", gateway.AnyKey, s.handleStats)
	srv.Mount(fiber.MethodGet, readPrefix+"/deliveries", gateway.AnyKey, s.handleDeliveries)
	srv.Mount(fiber.MethodGet, readPrefix+"/deliveries/:delivery_id", gateway.AnyKey, s.handleDelivery)
}

// param copies a path parameter (fiber reuses request memory).
func param(c *fiber.Ctx, name string) string { return strings.Clone(c.Params(name)) }

func (s *Service) handleCreateSecret(c *fiber.Ctx) error {
	v, err := s.CreateSecret(gateway.Context(c), gateway.Tenant(c))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return gateway.Respond(c, fiber.StatusCreated, v)
}

func (s *Service) handleRotate(c *fiber.Ctx) error {
	v, err := s.RotateSecret(gateway.Context(c), gateway.Tenant(c), param(c, "id"))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return gateway.Respond(c, fiber.StatusCreated, v)
}

func (s *Service) handlePause(c *fiber.Ctx) error {
	id := param(c, "id")
	if err := s.Pause(gateway.Context(c), gateway.Tenant(c), id); err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, fiber.Map{"config_id": id, "paused": true})
}

func (s *Service) handlePaused(c *fiber.Ctx) error {
	items, err := s.Pauses(gateway.Context(c), gateway.Tenant(c))
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": items})
}

func (s *Service) handleResume(c *fiber.Ctx) error {
	id := param(c, "id")
	if err := s.Resume(gateway.Context(c), gateway.Tenant(c), id); err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, fiber.Map{"config_id": id, "paused": false})
}

func (s *Service) handleDeadLetters(c *fiber.Ctx) error {
	limit := 0
	if l := c.Query("limit"); l != "" {
		n, err := parseLimit(l)
		if err != nil {
			return err
		}
		limit = n
	}
	page, err := s.DeadLetters(gateway.Context(c), gateway.Tenant(c), strings.Clone(c.Query("config_id")), strings.Clone(c.Query("cursor")), limit)
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, page)
}

func parseLimit(s string) (int, error) {
	n := 0
	for _, ch := range s {
		if ch < '0' || ch > '9' || n > 1_000_000 {
			return 0, problem.Validation([]problem.FieldError{{Field: "limit", Code: problem.CodeType, Message: "limit must be a positive integer"}})
		}
		n = n*10 + int(ch-'0')
	}
	if n == 0 {
		return 0, problem.Validation([]problem.FieldError{{Field: "limit", Code: problem.CodeRange, Message: "limit must be a positive integer"}})
	}
	return n, nil
}

func (s *Service) handleReplay(c *fiber.Ctx) error {
	v, err := s.Replay(gateway.Context(c), gateway.Tenant(c), param(c, "delivery_id"))
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, v)
}

// handleReplayAll replays the tenant's dead deliveries, of one config when
// the optional JSON body names config_id.
func (s *Service) handleReplayAll(c *fiber.Ctx) error {
	configID := ""
	if len(c.Body()) > 0 {
		in, _, err := gateway.ReadJSON(c)
		if err != nil {
			return err
		}
		if v, ok := in["config_id"]; ok {
			id, ok := v.(string)
			if !ok || id == "" {
				return problem.Validation([]problem.FieldError{{Field: "config_id", Code: problem.CodeType, Message: "config_id must be a non-empty string"}})
			}
			configID = id
		}
	}
	v, err := s.ReplayAll(gateway.Context(c), gateway.Tenant(c), configID)
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, v)
}

// handleDeliveries lists deliveries: ?status=pending|sent|dead,
// ?config_id=, ?from= and ?to= (ms since the epoch, to exclusive),
// ?cursor=, ?limit=. Every bad filter is named in one validation problem.
func (s *Service) handleDeliveries(c *fiber.Ctx) error {
	f := DeliveryFilter{Status: strings.Clone(c.Query("status")), ConfigID: strings.Clone(c.Query("config_id"))}
	var errs []problem.FieldError
	switch f.Status {
	case "", store.OutboxPending, store.OutboxSent, store.OutboxDead:
	default:
		errs = append(errs, problem.FieldError{Field: "status", Code: problem.CodeEnum, Message: "status must be one of pending, sent, dead"})
	}
	for _, q := range []struct {
		name string
		to   *int64
	}{{"from", &f.From}, {"to", &f.To}} {
		v := c.Query(q.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, problem.FieldError{Field: q.name, Code: problem.CodeType, Message: q.name + " must be a time in milliseconds since the epoch"})
			continue
		}
		*q.to = n
	}
	if f.From != 0 && f.To != 0 && f.To <= f.From {
		errs = append(errs, problem.FieldError{Field: "to", Code: problem.CodeRange, Message: "to must be after from"})
	}
	limit := 0
	if l := c.Query("limit"); l != "" {
		n, err := parseLimit(l)
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) {
				return err
			}
			errs = append(errs, pe.Errors...)
		}
		limit = n
	}
	if len(errs) > 0 {
		return problem.Validation(errs)
	}
	page, err := s.Deliveries(gateway.Context(c), gateway.Tenant(c), f, strings.Clone(c.Query("cursor")), limit)
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, page)
}

func (s *Service) handleDelivery(c *fiber.Ctx) error {
	v, err := s.Delivery(gateway.Context(c), gateway.Tenant(c), param(c, "delivery_id"))
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, v)
}
