package projector

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
)

// Mount adds the projection endpoints of the platform API:
//
//	GET  /v1/projections            the caller's projections and their state
//	POST /v1/projections/:id/query  {filters?} -> {results, count, _meta}
//
// The query endpoint answers like a manifest route with action query, for
// callers without one.
func (s *Service) Mount(srv *gateway.Server) {
	for _, r := range s.routes() {
		srv.Mount(r.Doc, r.Handler)
	}
}

// Endpoints documents the endpoints Mount adds.
func Endpoints() []openapi.Endpoint { return gateway.Docs((*Service)(nil).routes()) }

func (s *Service) routes() []gateway.Route {
	const (
		ok, bad, notFound = http.StatusOK, http.StatusBadRequest, http.StatusNotFound
	)
	return []gateway.Route{
		{Handler: s.handleList, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/projections", ID: "listProjections", Tag: openapi.TagProjections,
			Summary:     "List the tenant's projections",
			Description: "Each projection config that runs, its current version, the version queries read and whether it has caught up with the fact stream (false while it backfills).",
			Status:      ok, OK: "The projections.", Data: openapi.Ref("ProjectionList")}},
		{Handler: s.handleQuery, Doc: openapi.Endpoint{Method: http.MethodPost, Path: "/v1/projections/:id/query", ID: "queryProjection", Tag: openapi.TagProjections,
			Summary:     "Query a projection",
			Description: "The results of a projection, as the query action of a manifest route answers them. The path names the projection config by id or name.",
			Params:      []openapi.Param{openapi.IDParam("projection config (or its name)")},
			Body:        openapi.Ref("ProjectionQueryRequest"), Status: ok, OK: "The projection's results.", Data: openapi.Ref("QueryResult"),
			Problems: []int{bad, notFound, http.StatusServiceUnavailable}}},
	}
}

func (s *Service) handleList(c *fiber.Ctx) error {
	if err := gateway.CheckQuery(c); err != nil {
		return err
	}
	items := s.Statuses(gateway.Tenant(c))
	if items == nil {
		items = []Status{}
	}
	return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": items})
}

func (s *Service) handleQuery(c *fiber.Ctx) error {
	name := gateway.Param(c, "id")
	// Filters go in the body; a query string would be ignored.
	if err := gateway.CheckQuery(c); err != nil {
		return err
	}
	var filters map[string]any
	if len(c.Body()) > 0 {
		body, _, err := gateway.ReadJSON(c)
		if err != nil {
			return err
		}
		if err := onlyFilters(body, &filters); err != nil {
			return err
		}
	}
	results, meta, err := s.Query(gateway.Context(c), gateway.Tenant(c), name, filters)
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, fiber.Map{"results": results, "count": len(results), "_meta": meta})
}
