package console

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// statsForm is the delivery statistics view's window, echoed back.
type statsForm struct {
	From, To, Buckets string
}

// num shows a number of the API as it came (empty for null).
func num(v any) string {
	switch n := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// percent shows a ratio of the API (0 to 1) as a percentage to one
// decimal, rounded down above 99.9 so that a single failure among many
// attempts does not read as 100 % (empty for null).
func percent(v any) string {
	r, ok := v.(float64)
	if !ok {
		return ""
	}
	p := math.Round(r*1000) / 10
	if p == 100 && r < 1 {
		p = 99.9
	}
	if p == 0 && r > 0 {
		p = 0.1
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + " %"
}

// deliveryStatsPage charts the tenant's delivery attempts over a window
// from GET /v1/webhooks/deliveries/stats (any key of the tenant): p50/p99
// response time and success ratio per bucket, the numbers in a table.
func (c *Console) deliveryStatsPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	f := statsForm{From: fc.Query("from"), To: fc.Query("to"), Buckets: fc.Query("buckets")}
	q := url.Values{}
	var bad []string
	for _, kv := range [][2]string{{"from", f.From}, {"to", f.To}} {
		if kv[1] == "" {
			continue
		}
		t, err := time.Parse(timeInput, kv[1])
		if err != nil {
			bad = append(bad, kv[0])
			continue
		}
		q.Set(kv[0], strconv.FormatInt(t.UnixMilli(), 10))
	}
	if f.Buckets != "" {
		q.Set("buckets", f.Buckets)
	}
	data := map[string]any{"form": f}
	if len(bad) > 0 {
		pe := &apiError{Status: 400, Title: "Bad Request", Detail: "Times are YYYY-MM-DDTHH:MM in UTC"}
		for _, k := range bad {
			pe.Errors = append(pe.Errors, fieldError{Field: k, Message: "not a time"})
		}
		return c.render(fc, s, pe.Status, "delivery-stats", data, pe)
	}
	var out map[string]any
	if err := c.call(ctx, s, http.MethodGet, "/v1/webhooks/deliveries/stats?"+q.Encode(), "", nil, &out); err != nil {
		return c.show(fc, s, "delivery-stats", data, err)
	}
	data["stats"] = out
	return c.render(fc, s, fiber.StatusOK, "delivery-stats", data, nil)
}

// lagRow is one sample of the lag history, a cell per consumer.
type lagRow struct {
	At   int64
	Head int64
	Lag  []string
}

// lagHistory reads GET /v1/admin/stream/history into rows with one column
// per consumer (empty where a sample lacks it).
func (c *Console) lagHistory(fc *fiber.Ctx, s *session) ([]string, []lagRow, error) {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	var out struct {
		Samples []struct {
			At   int64            `json:"at"`
			Head int64            `json:"head"`
			Lag  map[string]int64 `json:"lag"`
		} `json:"samples"`
	}
	if err := c.call(ctx, s, http.MethodGet, "/v1/admin/stream/history", "", nil, &out); err != nil {
		return nil, nil, err
	}
	var names []string
	for _, smp := range out.Samples {
		for n := range smp.Lag {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	rows := make([]lagRow, 0, len(out.Samples))
	for _, smp := range out.Samples {
		r := lagRow{At: smp.At, Head: smp.Head}
		for _, n := range names {
			if v, ok := smp.Lag[n]; ok {
				r.Lag = append(r.Lag, strconv.FormatInt(v, 10))
			} else {
				r.Lag = append(r.Lag, "")
			}
		}
		rows = append(rows, r)
	}
	return names, rows, nil
}

// allProjectionsPage lists every tenant's projections with their
// readiness from GET /v1/admin/projections (operator only).
func (c *Console) allProjectionsPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	var out struct {
		Items []map[string]any `json:"items"`
	}
	err := c.call(ctx, s, http.MethodGet, "/v1/admin/projections", "", nil, &out)
	return c.show(fc, s, "all-projections", out.Items, err)
}

// seriesJSON names a chart's columns for the script.
func seriesJSON(names ...string) string {
	if names == nil {
		names = []string{} // [], not null: a stream with no consumers yet
	}
	b, _ := json.Marshal(names)
	return string(b)
}
