package webhook

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
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
	for _, r := range s.routes() {
		srv.Mount(r.Doc, r.Handler)
	}
}

// Endpoints documents the endpoints Mount adds.
func Endpoints() []openapi.Endpoint { return gateway.Docs((*Service)(nil).routes()) }

// Documentation shared by the endpoints.
var (
	configParam   = openapi.IDParam("webhook config")
	deliveryParam = openapi.PathParam("delivery_id", "Id of the delivery (del_...).")
	configFilter  = openapi.QueryParam("config_id", "Only deliveries of this webhook config.", openapi.String(""))
	deliveryQuery = []openapi.Param{
		openapi.QueryParam("status", "Only deliveries in this state.", openapi.Enum("", "pending", "sent", "dead")),
		configFilter,
		openapi.QueryParam("from", "Only deliveries triggered at or after this time (milliseconds since the epoch).", openapi.Integer("")),
		openapi.QueryParam("to", "Only deliveries triggered before this time (milliseconds since the epoch).", openapi.Integer("")),
		openapi.Limit, openapi.Cursor,
	}
	secretShown = openapi.Object("A signing secret, shown once.", []string{"secret_ref", "secret"}, false,
		openapi.Prop{Name: "secret_ref", Schema: openapi.String("The reference a webhook config names in its settings.")},
		openapi.Prop{Name: "secret", Schema: openapi.String("The secret; it is never shown again.")},
		openapi.Prop{Name: "created_at", Schema: openapi.Millis("When it was made")},
	)
	rotation = openapi.Object("A config's new secret, shown once, and how long the previous one still signs.", []string{"secret_ref", "secret", "config"}, false,
		openapi.Prop{Name: "secret_ref", Schema: openapi.String("The new secret's reference.")},
		openapi.Prop{Name: "secret", Schema: openapi.String("The new secret; it is never shown again.")},
		openapi.Prop{Name: "previous_secret_ref", Schema: openapi.String("The previous secret's reference.")},
		openapi.Prop{Name: "previous_secret_expires_at", Schema: openapi.Nullable(openapi.Millis("Until when deliveries are signed with the previous secret too; null when other configs still use it, and it does not expire"))},
		openapi.Prop{Name: "previous_secret_used_by", Schema: openapi.Array("The other active configs that still use the previous secret (absent when none).", openapi.String("A config id."))},
		openapi.Prop{Name: "config", Schema: openapi.Ref("Config")},
	)
	pauseState = openapi.Object("A config's pause state.", []string{"config_id", "paused"}, false,
		openapi.Prop{Name: "config_id", Schema: openapi.String("The webhook config.")},
		openapi.Prop{Name: "paused", Schema: openapi.Boolean("Whether its deliveries are held.")},
	)
	replayed = openapi.Object("A dead delivery sent again.", []string{"delivery_id", "status"}, false,
		openapi.Prop{Name: "delivery_id", Schema: openapi.String("The delivery.")},
		openapi.Prop{Name: "status", Schema: openapi.String("Its state now (pending).")},
		openapi.Prop{Name: "attempt", Schema: openapi.Integer("The attempt the replay makes.")},
		openapi.Prop{Name: "timestamp", Schema: openapi.Integer("The new signature timestamp (Unix seconds).")},
		openapi.Prop{Name: "dlq_message_id", Schema: openapi.String("The dead letter replayed.")},
		openapi.Prop{Name: "replay_fact_id", Schema: openapi.String("The fact recording the replay.")},
	)
	delivery = openapi.FreeObject("A delivery: delivery_id, tenant_id, triggered_fact_id, webhook_config_id and version, url, status (pending, sent, dead), its attempts and their outcomes.")
	page     = func(desc string, item openapi.Schema) openapi.Schema {
		return openapi.Object(desc, []string{"items", "hasMore"}, false,
			openapi.Prop{Name: "items", Schema: openapi.Array("", item)},
			openapi.Prop{Name: "cursor", Schema: openapi.String("Pass as cursor for the next page; absent on the last.")},
			openapi.Prop{Name: "hasMore", Schema: openapi.Boolean("Whether another page follows.")},
		)
	}
)

func (s *Service) routes() []gateway.Route {
	const (
		ok, created, notFound, conflict = fiber.StatusOK, fiber.StatusCreated, fiber.StatusNotFound, fiber.StatusConflict
		bad                             = fiber.StatusBadRequest
	)
	admin := func(method, path, id, summary, desc string, params []openapi.Param, status int, okDesc string, data openapi.Schema, problems ...int) openapi.Endpoint {
		return openapi.Endpoint{Method: method, Path: adminPrefix + path, ID: id, Tag: openapi.TagWebhooks, Access: openapi.AdminKey,
			Summary: summary, Description: desc, Params: params, Status: status, OK: okDesc, Data: data, Problems: problems}
	}
	replayAll := admin(fiber.MethodPost, "/dead-letters/replay", "replayWebhookDeadLetters", "Replay every dead delivery",
		"Sends every dead delivery of the tenant again, or those of one config when the optional body names config_id.",
		nil, ok, "The replayed deliveries and those that could not be.", openapi.Object("The outcome of a bulk replay.", []string{"replayed", "failed", "hasMore"}, false,
			openapi.Prop{Name: "replayed", Schema: openapi.Array("", replayed)},
			openapi.Prop{Name: "failed", Schema: openapi.Array("Deliveries that could not be replayed, with the reason.", openapi.FreeObject(""))},
			openapi.Prop{Name: "hasMore", Schema: openapi.Boolean("Whether dead deliveries remain; call again.")},
		), bad)
	replayAll.Content = []openapi.Media{{Type: fiber.MIMEApplicationJSON, Schema: openapi.Object("Which dead deliveries to replay.", nil, false,
		openapi.Prop{Name: "config_id", Schema: openapi.String("Only those of this webhook config.")})}}
	replayAll.ContentDesc, replayAll.OptionalBody = "Optional: an empty body replays every dead delivery.", true
	read := func(e openapi.Endpoint, id string) openapi.Endpoint {
		e.Path, e.ID, e.Access = readPrefix+strings.TrimPrefix(e.Path, adminPrefix), id, openapi.AnyKey
		e.Description += " Any key of the tenant may read it."
		return e
	}
	deliveries := admin(fiber.MethodGet, "/deliveries", "listWebhookDeliveries", "List deliveries",
		"The tenant's webhook deliveries, newest first, a page at a time; every bad filter is named in one validation problem.",
		deliveryQuery, ok, "A page of deliveries.", page("A page of deliveries.", delivery), bad)
	one := admin(fiber.MethodGet, "/deliveries/:delivery_id", "getWebhookDelivery", "Get a delivery",
		"One delivery's state and attempts.", []openapi.Param{deliveryParam}, ok, "The delivery.", delivery, notFound)
	return []gateway.Route{
		{Handler: s.handleCreateSecret, Doc: admin(fiber.MethodPost, "/secrets", "createWebhookSecret", "Create a signing secret",
			"Makes a signing secret for webhook configs to name; the response holds it once (Cache-Control: no-store).",
			nil, created, "The secret.", secretShown)},
		{Handler: s.handleRotate, Doc: admin(fiber.MethodPost, "/configs/:id/rotate-secret", "rotateWebhookSecret", "Rotate a config's secret",
			"Gives the config a new signing secret; deliveries carry signatures of both secrets until the previous one expires.",
			[]openapi.Param{configParam}, created, "The new secret.", rotation, notFound, conflict)},
		{Handler: s.handlePause, Doc: admin(fiber.MethodPost, "/configs/:id/pause", "pauseWebhookConfig", "Pause a config's deliveries",
			"Holds the config's deliveries until it is resumed; they are not lost.",
			[]openapi.Param{configParam}, ok, "The config is paused.", pauseState, notFound)},
		{Handler: s.handleResume, Doc: admin(fiber.MethodPost, "/configs/:id/resume", "resumeWebhookConfig", "Resume a paused config",
			"Sends the held deliveries and the ones to come.",
			[]openapi.Param{configParam}, ok, "The config is resumed.", pauseState, notFound)},
		{Handler: s.handlePaused, Doc: admin(fiber.MethodGet, "/paused", "listPausedWebhookConfigs", "List the paused configs",
			"The tenant's paused webhook configs.", nil, ok, "The paused configs.",
			openapi.List("The paused configs.", "", openapi.FreeObject("A paused config: its id and when it was paused.")))},
		{Handler: s.handleDeadLetters, Doc: admin(fiber.MethodGet, "/dead-letters", "listWebhookDeadLetters", "List dead letters",
			"Deliveries that used up their attempts, newest first, a page at a time.",
			[]openapi.Param{configFilter, openapi.Limit, openapi.Cursor}, ok, "A page of dead letters.",
			page("A page of dead letters.", openapi.FreeObject("A dead letter: the delivery, its config, its last attempt's outcome and when it died.")), bad)},
		{Handler: s.handleReplay, Doc: admin(fiber.MethodPost, "/dead-letters/:delivery_id/replay", "replayWebhookDeadLetter", "Replay a dead delivery",
			"Sends a dead delivery again, with a new signature timestamp.",
			[]openapi.Param{deliveryParam}, ok, "The delivery is pending again.", replayed, notFound, conflict)},
		{Handler: s.handleReplayAll, Doc: replayAll},
		{Handler: s.handleDeliveries, Doc: deliveries},
		{Handler: s.handleDelivery, Doc: one},
		// The same handlers: reading a tenant's deliveries is no admin act.
		// Before /:delivery_id: a delivery id starts with del_, never "stats".
		{Handler: s.handleStats, Doc: openapi.Endpoint{Method: fiber.MethodGet, Path: readPrefix + "/deliveries/stats", ID: "getWebhookDeliveryStats", Tag: openapi.TagWebhooks,
			Summary:     "Delivery statistics",
			Description: "Attempts, success ratio and p50/p99 response time of the tenant's deliveries over time, in buckets.",
			Params: []openapi.Param{
				openapi.QueryParam("from", "Start of the period (milliseconds since the epoch).", openapi.Integer("")),
				openapi.QueryParam("to", "End of the period (milliseconds since the epoch).", openapi.Integer("")),
				openapi.QueryParam("buckets", "How many buckets to split the period into.", openapi.Integer("")),
			},
			Status: ok, OK: "The statistics.", Data: openapi.Object("Delivery statistics.", []string{"from", "to", "buckets", "total"}, false,
				openapi.Prop{Name: "from", Schema: openapi.Millis("Start of the period")},
				openapi.Prop{Name: "to", Schema: openapi.Millis("End of the period")},
				openapi.Prop{Name: "buckets", Schema: openapi.Array("One entry per bucket: attempts, successes, ratio, p50 and p99 response times.", openapi.FreeObject(""))},
				openapi.Prop{Name: "total", Schema: openapi.FreeObject("The same over the whole period.")},
				openapi.Prop{Name: "truncated", Schema: openapi.Boolean("Whether the period held more attempts than were counted.")},
			), Problems: []int{bad}}},
		{Handler: s.handleDeliveries, Doc: read(deliveries, "listTenantWebhookDeliveries")},
		{Handler: s.handleDelivery, Doc: read(one, "getTenantWebhookDelivery")},
	}
}

// param copies a path parameter (fiber reuses request memory).
func param(c *fiber.Ctx, name string) string { return gateway.Param(c, name) }

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
	if err := gateway.CheckQuery(c); err != nil {
		return err
	}
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
	if err := gateway.CheckQuery(c, "config_id", "cursor", "limit"); err != nil {
		return err
	}
	if err := gateway.RefuseEmpty(c, "config_id", "cursor"); err != nil {
		return err
	}
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

// timeRange reads the from and to query parameters, times in
// milliseconds since the epoch, into from and to (left 0 when absent),
// naming each bad one. As on GET /v1/facts a time is a positive number:
// 0 is "no bound" inside, and a client's 0 was refused as no time at all.
func timeRange(c *fiber.Ctx, from, to *int64) []problem.FieldError {
	var errs []problem.FieldError
	for _, q := range []struct {
		name string
		into *int64
	}{{"from", from}, {"to", to}} {
		v := c.Query(q.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, problem.FieldError{Field: q.name, Code: problem.CodeFormat, Message: q.name + " must be a positive number of milliseconds since the epoch"})
			continue
		}
		*q.into = n
	}
	return errs
}

// handleDeliveries lists deliveries: ?status=pending|sent|dead,
// ?config_id=, ?from= and ?to= (ms since the epoch, to exclusive),
// ?cursor=, ?limit=. Every bad filter is named in one validation problem.
func (s *Service) handleDeliveries(c *fiber.Ctx) error {
	// A misspelt filter (stauts=dead) would list every delivery.
	if err := gateway.CheckQuery(c, "status", "config_id", "from", "to", "cursor", "limit"); err != nil {
		return err
	}
	if err := gateway.RefuseEmpty(c, "status", "config_id", "from", "to", "cursor"); err != nil {
		return err
	}
	f := DeliveryFilter{Status: strings.Clone(c.Query("status")), ConfigID: strings.Clone(c.Query("config_id"))}
	var errs []problem.FieldError
	switch f.Status {
	case "", store.OutboxPending, store.OutboxSent, store.OutboxDead:
	default:
		errs = append(errs, problem.FieldError{Field: "status", Code: problem.CodeEnum, Message: "status must be one of pending, sent, dead"})
	}
	errs = append(errs, timeRange(c, &f.From, &f.To)...)
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
	if err := gateway.CheckQuery(c); err != nil {
		return err
	}
	v, err := s.Delivery(gateway.Context(c), gateway.Tenant(c), param(c, "delivery_id"))
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, v)
}
