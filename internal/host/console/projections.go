package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/problem"
)

// chartRow is one row of a projection query, its numbers kept as the
// API's exact text.
type chartRow struct {
	Bucket string
	X      int64  // the bucket's start, ms (0 when the key is not a time)
	Group  string // the API's JSON, which the chart groups by
	// Parts are the group's members, shown each isolated (<bdi>): a
	// right-to-left override in one value reordered the rest of the label.
	Parts  []groupPart
	Values map[string]string
}

// groupPart is one member of a row's group: a field and its value.
type groupPart struct{ Field, Value string }

// groupParts reads a group object's members in the API's order; a group
// that is not an object is one part without a field.
func groupParts(raw string) []groupPart {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return []groupPart{{Value: raw}}
	}
	var parts []groupPart
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return []groupPart{{Value: raw}}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return []groupPart{{Value: raw}}
		}
		p := groupPart{Field: fmt.Sprint(k), Value: string(v)}
		var str string
		if json.Unmarshal(v, &str) == nil {
			p.Value = str
		}
		parts = append(parts, p)
	}
	return parts
}

// chartData is what the projections view renders: the table the chart
// is drawn from.
type chartData struct {
	Projections []map[string]any
	ID          string
	From, To    string
	Metrics     []string
	Rows        []chartRow
	Meta        map[string]any
	// Computed says why the numbers were computed from the facts rather
	// than read from the cached state the view asks for first.
	Computed string
}

// rowKeys are the members of a query row that are not numbers.
var rowKeys = map[string]bool{"key": true, "bucket": true, "window": true, "group": true}

// projectionsPage lists the tenant's projections and, for the one picked,
// charts the answer of POST /v1/projections/:id/query over the range.
func (c *Console) projectionsPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	d := chartData{ID: fc.Query("id"), From: fc.Query("from"), To: fc.Query("to")}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := c.call(ctx, s, http.MethodGet, "/v1/projections", "", nil, &list); err != nil {
		return c.show(fc, s, "projections", nil, err)
	}
	d.Projections = list.Items
	if d.ID == "" {
		return c.render(fc, s, fiber.StatusOK, "projections", d, nil)
	}
	// The form's datetime-local values are bucket keys the API reads (UTC).
	filters := map[string]any{}
	if d.From != "" {
		filters["from"] = d.From
	}
	if d.To != "" {
		filters["to"] = d.To
	}
	var out struct {
		Results []map[string]json.RawMessage `json:"results"`
		Meta    map[string]any               `json:"_meta"`
	}
	query := func() error {
		body, _ := json.Marshal(map[string]any{"filters": filters})
		return c.call(ctx, s, http.MethodPost, "/v1/projections/"+url.PathEscape(d.ID)+"/query", "application/json", body, &out)
	}
	err := query()
	var pe *apiError
	if errors.As(err, &pe) && strings.Contains(pe.Detail, "filters.mode compute") {
		// The API names a mode the view has no choice of: the cached
		// state is down (503), or the projection keeps none for this
		// query (400). The view asks for the numbers computed from the
		// facts instead, and says so.
		unavailable := pe.Status == http.StatusServiceUnavailable
		filters["mode"] = "compute"
		err = query()
		var ce *apiError
		switch {
		case err == nil && unavailable:
			d.Computed = "The projection's cached state cannot be read right now, so these numbers were computed from the facts (slower, and as of now)."
		case err == nil:
			d.Computed = "This projection keeps no cached state for this query, so these numbers were computed from the facts."
		case errors.As(err, &ce) && unavailable && ce.Status == http.StatusServiceUnavailable:
			pe = &apiError{Status: ce.Status, Title: ce.Title, TraceID: ce.TraceID,
				Detail: "The projection's cached state cannot be read right now, and computing the numbers from the facts failed too; try again in a moment"}
			return c.render(fc, s, pe.Status, "projections", d, pe)
		}
	}
	if errors.As(err, &pe) {
		return c.render(fc, s, pe.Status, "projections", d, pe)
	}
	if err != nil {
		return problem.Wrap(problem.Unavailable, "The console could not reach the API", err)
	}
	d.Meta = out.Meta
	for _, r := range out.Results {
		row := chartRow{Values: map[string]string{}}
		_ = json.Unmarshal(r["bucket"], &row.Bucket)
		if len(r["group"]) > 0 && string(r["group"]) != "null" {
			row.Group = string(r["group"])
			row.Parts = groupParts(row.Group)
		}
		row.X = bucketStart(row.Bucket)
		for k, v := range r {
			if rowKeys[k] {
				continue
			}
			row.Values[k] = string(v)
			if !slices.Contains(d.Metrics, k) {
				d.Metrics = append(d.Metrics, k)
			}
		}
		d.Rows = append(d.Rows, row)
	}
	slices.Sort(d.Metrics)
	return c.render(fc, s, fiber.StatusOK, "projections", d, nil)
}

// bucketStart reads a bucket key ("2024-01-15T10:30", "2024-01-15T10",
// "2024-01-15", "2024-01", UTC) as milliseconds.
func bucketStart(key string) int64 {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, key); err == nil {
			return t.UnixMilli()
		}
	}
	return 0
}
