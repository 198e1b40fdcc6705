package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// Delivery statistics: GET /v1/webhooks/deliveries/stats?from=&to=&buckets=
// (any key of the tenant) buckets the tenant's webhook.sent audit facts of
// [from, to) (ms) into equal spans.
const (
	defaultStatsBuckets = 24
	maxStatsBuckets     = 1000
	defaultStatsWindow  = 24 * 60 * 60 * 1000
	// maxStatsFacts bounds the attempts one answer reads; past it the
	// answer says truncated.
	maxStatsFacts = 200_000
)

// StatsFilter selects the window and its buckets.
type StatsFilter struct {
	From, To int64
	Buckets  int
}

// StatsBucket is one span of the window: its attempts, how many
// succeeded, and the receivers' response times (nearest-rank percentiles
// of the attempts that have one). Ratios and percentiles are null when
// the span has nothing to measure.
type StatsBucket struct {
	From         int64    `json:"from"`
	To           int64    `json:"to"`
	Attempts     int      `json:"attempts"`
	Succeeded    int      `json:"succeeded"`
	SuccessRatio *float64 `json:"success_ratio"`
	P50MS        *float64 `json:"p50_ms"`
	P99MS        *float64 `json:"p99_ms"`
}

// StatsView answers the statistics read.
type StatsView struct {
	From      int64         `json:"from"`
	To        int64         `json:"to"`
	Buckets   []StatsBucket `json:"buckets"`
	Total     StatsBucket   `json:"total"`
	Truncated bool          `json:"truncated"`
}

// edge is where bucket i of n starts in [from, to).
func edge(from, to int64, n, i int) int64 { return from + (to-from)*int64(i)/int64(n) }

// percentile is the nearest-rank percentile p (0-1] of sorted values.
func percentile(sorted []float64, p float64) *float64 {
	if len(sorted) == 0 {
		return nil
	}
	r := int(math.Ceil(p * float64(len(sorted))))
	v := sorted[max(r, 1)-1]
	return &v
}

func summarise(b *StatsBucket, times []float64) {
	if b.Attempts > 0 {
		r := float64(b.Succeeded) / float64(b.Attempts)
		b.SuccessRatio = &r
	}
	slices.Sort(times)
	b.P50MS, b.P99MS = percentile(times, 0.50), percentile(times, 0.99)
}

// DeliveryStats reads the tenant's webhook.sent facts whose timestamp is
// in [f.From, f.To) and buckets them.
func (s *Service) DeliveryStats(ctx context.Context, tenant string, f StatsFilter) (*StatsView, error) {
	v := &StatsView{From: f.From, To: f.To, Buckets: make([]StatsBucket, f.Buckets)}
	times := make([][]float64, f.Buckets)
	var all []float64
	for i := range v.Buckets {
		v.Buckets[i].From, v.Buckets[i].To = edge(f.From, f.To, f.Buckets, i), edge(f.From, f.To, f.Buckets, i+1)
	}
	var after int64
	read := 0
	for {
		facts, err := s.st.ListFacts(ctx, store.FactFilter{TenantID: tenant, Type: ConfigType, Subtype: "sent",
			From: f.From, To: f.To - 1, AfterPosition: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("webhook: delivery stats: %w", err)
		}
		for _, fc := range facts {
			var d struct {
				Success        bool     `json:"success"`
				ResponseTimeMS *float64 `json:"response_time_ms"`
			}
			if json.Unmarshal(fc.Data, &d) != nil || fc.Timestamp < f.From || fc.Timestamp >= f.To {
				continue
			}
			i := int((fc.Timestamp - f.From) * int64(f.Buckets) / (f.To - f.From))
			for i+1 < f.Buckets && fc.Timestamp >= v.Buckets[i+1].From {
				i++
			}
			for i > 0 && fc.Timestamp < v.Buckets[i].From {
				i--
			}
			b := &v.Buckets[i]
			b.Attempts++
			v.Total.Attempts++
			if d.Success {
				b.Succeeded++
				v.Total.Succeeded++
			}
			if d.ResponseTimeMS != nil {
				times[i] = append(times[i], *d.ResponseTimeMS)
				all = append(all, *d.ResponseTimeMS)
			}
		}
		read += len(facts)
		if len(facts) < 1000 {
			break
		}
		if read >= maxStatsFacts {
			v.Truncated = true
			break
		}
		after = facts[len(facts)-1].Position
	}
	for i := range v.Buckets {
		summarise(&v.Buckets[i], times[i])
	}
	v.Total.From, v.Total.To = f.From, f.To
	summarise(&v.Total, all)
	return v, nil
}

// handleStats reads from, to (ms since the epoch, to exclusive; the last
// 24 hours by default) and buckets (1-1000, 24 by default); every bad one
// is named in one validation problem.
func (s *Service) handleStats(c *fiber.Ctx) error {
	if err := gateway.CheckQuery(c, "from", "to", "buckets"); err != nil {
		return err
	}
	if err := gateway.RefuseEmpty(c, "from", "to", "buckets"); err != nil {
		return err
	}
	f := StatsFilter{Buckets: defaultStatsBuckets}
	errs := timeRange(c, &f.From, &f.To)
	if v := c.Query("buckets"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxStatsBuckets {
			errs = append(errs, problem.FieldError{Field: "buckets", Code: problem.CodeRange, Message: fmt.Sprintf("buckets must be an integer from 1 to %d", maxStatsBuckets)})
		} else {
			f.Buckets = n
		}
	}
	if len(errs) > 0 {
		return problem.Validation(errs)
	}
	if f.To == 0 {
		f.To = s.clock.Now().UnixMilli()
		if f.From >= f.To {
			f.To = f.From + defaultStatsWindow
		}
	}
	if f.From == 0 {
		f.From = f.To - defaultStatsWindow
	}
	if f.To <= f.From {
		return problem.Validation([]problem.FieldError{{Field: "to", Code: problem.CodeRange, Message: "to must be after from"}})
	}
	v, err := s.DeliveryStats(gateway.Context(c), gateway.Tenant(c), f)
	if err != nil {
		return err
	}
	return gateway.Respond(c, fiber.StatusOK, v)
}
