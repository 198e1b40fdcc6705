package projector

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/host/gateway"
)

// Mount adds the projection endpoints of the platform API:
//
//	GET  /v1/projections            the caller's projections and their state
//	POST /v1/projections/:id/query  {filters?} -> {results, count, _meta}
//
// The query endpoint answers like a manifest route with action query, for
// callers without one.
func (s *Service) Mount(srv *gateway.Server) {
	srv.Mount(fiber.MethodGet, "/v1/projections", gateway.AnyKey, s.handleList)
	srv.Mount(fiber.MethodPost, "/v1/projections/:id/query", gateway.AnyKey, s.handleQuery)
}

func (s *Service) handleList(c *fiber.Ctx) error {
	items := s.Statuses(gateway.Tenant(c))
	if items == nil {
		items = []Status{}
	}
	return gateway.Respond(c, fiber.StatusOK, fiber.Map{"items": items})
}

func (s *Service) handleQuery(c *fiber.Ctx) error {
	name := strings.Clone(c.Params("id"))
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
