package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/problem"
)

// timeInput is the layout of the filter's datetime-local fields (UTC).
const timeInput = "2006-01-02T15:04"

// deliveryFilter is the deliveries view's form, echoed back in the page.
type deliveryFilter struct {
	Status, ConfigID, From, To string
}

// deliveriesPage lists the tenant's deliveries one page at a time through
// GET /v1/webhooks/deliveries, which any key of the tenant may read (live
// and test keys see it as their endpoint-owner portal); the API pages and
// filters, the page only turns the form's times into milliseconds.
func (c *Console) deliveriesPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	f := deliveryFilter{Status: fc.Query("status"), ConfigID: fc.Query("config_id"), From: fc.Query("from"), To: fc.Query("to")}
	data := map[string]any{"filter": f}
	q := url.Values{"limit": {"50"}}
	for k, v := range map[string]string{"status": f.Status, "config_id": f.ConfigID, "cursor": fc.Query("cursor")} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var bad []string
	for _, kv := range [][2]string{{"from", f.From}, {"to", f.To}} {
		k, v := kv[0], kv[1]
		if v == "" {
			continue
		}
		t, err := time.Parse(timeInput, v)
		if err != nil {
			bad = append(bad, k)
			continue
		}
		q.Set(k, strconv.FormatInt(t.UnixMilli(), 10))
	}
	if len(bad) > 0 {
		pe := &apiError{Status: 400, Title: "Bad Request", Detail: "Times are YYYY-MM-DDTHH:MM in UTC"}
		for _, k := range bad {
			pe.Errors = append(pe.Errors, fieldError{Field: k, Message: "not a time"})
		}
		return c.render(fc, s, pe.Status, "deliveries", data, pe)
	}
	var out map[string]any
	err := c.call(ctx, s, http.MethodGet, "/v1/webhooks/deliveries?"+q.Encode(), "", nil, &out)
	var pe *apiError
	if errors.As(err, &pe) {
		return c.render(fc, s, pe.Status, "deliveries", data, pe)
	}
	if err != nil {
		return problem.Wrap(problem.Unavailable, "The console could not reach the API", err)
	}
	data["page"] = out
	// The next and the first page keep the filters.
	nq, _ := url.ParseQuery(string(fc.Request().URI().QueryArgs().QueryString()))
	if cur, _ := out["cursor"].(string); cur != "" {
		nq.Set("cursor", cur)
		data["next"] = Prefix + "/deliveries?" + nq.Encode()
	}
	if fc.Query("cursor") != "" {
		nq.Del("cursor")
		data["first"] = Prefix + "/deliveries?" + nq.Encode()
	}
	return c.render(fc, s, fiber.StatusOK, "deliveries", data, nil)
}

// deliveryPage shows one delivery with its attempts as a timeline.
func (c *Console) deliveryPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	var out map[string]any
	err := c.call(ctx, s, http.MethodGet, "/v1/webhooks/deliveries/"+url.PathEscape(gateway.Param(fc, "id")), "", nil, &out)
	return c.show(fc, s, "delivery", out, err)
}
