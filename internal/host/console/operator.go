package console

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/gofiber/fiber/v2"
)

// domainPage shows the domain model from GET /v1/admin/domain: entity
// types, their fact types and data schemas, and the ledger serving each.
func (c *Console) domainPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	var out map[string]any
	err := c.call(ctx, s, http.MethodGet, "/v1/admin/domain", "", nil, &out)
	return c.show(fc, s, "domain", out, err)
}

// streamPage shows the stream's head and each consumer's position and
// lag from GET /v1/admin/stream, consumers by name, and their lag over
// time from GET /v1/admin/stream/history.
func (c *Console) streamPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	var out struct {
		Head      float64          `json:"head"`
		Consumers []map[string]any `json:"consumers"`
	}
	err := c.call(ctx, s, http.MethodGet, "/v1/admin/stream", "", nil, &out)
	sort.Slice(out.Consumers, func(i, j int) bool {
		return fmt.Sprint(out.Consumers[i]["name"]) < fmt.Sprint(out.Consumers[j]["name"])
	})
	if err != nil {
		return c.show(fc, s, "stream", nil, err)
	}
	// The lag over time, as this process sampled it.
	names, rows, err := c.lagHistory(fc, s)
	return c.show(fc, s, "stream", map[string]any{"head": out.Head, "consumers": out.Consumers,
		"names": names, "series": seriesJSON(names...), "history": rows}, err)
}
