package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/store"
)

// Query answers the gateway's query action: the results of the tenant's
// projection named name (its config id or its name) as a list of rows (see
// projection.Engine.Rows), and the meta the data object carries under
// "_meta". Filters (all optional):
//
//   - from, to: inclusive bounds on bucket start times, as milliseconds
//     since the epoch or as text: RFC 3339, or a bucket key
//     ("2024-01-15T10:30", "2024-01-15T10", "2024-01-15", "2024-01"; UTC);
//   - aggregate: true merges the selected buckets into one row;
//   - mode: materialized (default), compute or verify; a materialized
//     query of a projection still backfilling is answered in compute mode
//     (the meta says so), never with partial results;
//   - groups: an object of groupBy field to value; a groupBy field may
//     also be given as a filter of its own ("data.currency": "EUR").
//
// Errors are problems: 404 for an unknown projection, 400 for bad filters.
func (s *Service) Query(ctx context.Context, tenant, name string, filters map[string]any) ([]any, map[string]any, error) {
	t, err := s.lookup(ctx, tenant, name)
	if err != nil {
		return nil, nil, err
	}
	if t == nil {
		return nil, nil, problem.Newf(problem.NotFound, "Projection %s not found", name)
	}
	s.mu.Lock()
	rt := t.serving()
	s.mu.Unlock()
	q, err := parseFilters(filters, rt.engine.Config())
	if err != nil {
		return nil, nil, err
	}
	ready := rt.isReady()
	if q.Mode == projection.ModeMaterialized && !ready {
		// Still backfilling: the cached state is incomplete, the facts are
		// not. Answer from them rather than with partial results.
		q.Mode = projection.ModeCompute
	}
	meta := map[string]any{
		"config_id":      rt.configID,
		"config_version": rt.version,
		"mode":           string(q.Mode),
		"ready":          ready,
	}
	var res projection.Result
	if q.Mode == projection.ModeVerify {
		rep, err := rt.engine.Verify(ctx, rt.key, q)
		if err != nil {
			return nil, nil, queryError(name, q.Mode, err)
		}
		drift := make([]any, len(rep.Drift))
		for i, d := range rep.Drift {
			drift[i] = d
		}
		meta["consistent"] = rep.Consistent
		meta["drift"] = drift
		res = rep.Computed
	} else {
		qctx := ctx
		if q.Mode == projection.ModeMaterialized {
			// The answer comes from the cached state: a Redis that stopped
			// answering (frozen, not refusing) is a prompt 503, not a
			// request held until its own deadline.
			var cancel context.CancelFunc
			qctx, cancel = context.WithTimeout(ctx, s.opts.StateTimeout)
			defer cancel()
		}
		if res, err = rt.engine.Query(qctx, rt.key, q); err != nil {
			return nil, nil, queryError(name, q.Mode, err)
		}
	}
	if est := projection.Estimated(res); len(est) > 0 {
		meta["estimated"] = est
	}
	rows := rt.engine.Rows(res, q.Aggregate)
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out, meta, nil
}

// lookup finds the projection by id, then by name, first among the running
// ones, then in the store (a config created a moment ago).
func (s *Service) lookup(ctx context.Context, tenant, name string) (*tracked, error) {
	type candidate struct {
		id     string
		byName string // the name it was found by; "" when by id
		t      *tracked
	}
	var cands []candidate
	s.mu.Lock()
	if t := s.tracked[ref{tenant, name}]; t != nil && t.current != nil {
		cands = append(cands, candidate{name, "", t})
	}
	var byName *candidate
	for r, t := range s.tracked {
		if r.tenant == tenant && t.name == name && t.current != nil && (byName == nil || r.id < byName.id) {
			byName = &candidate{r.id, name, t}
		}
	}
	s.mu.Unlock()
	if byName != nil {
		cands = append(cands, *byName)
	}
	for _, c := range cands {
		if t := s.confirm(ctx, tenant, c.id, c.byName, c.t); t != nil {
			return t, nil
		}
	}
	c, err := s.opts.Store.GetConfig(ctx, tenant, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if c, err = s.findByName(ctx, tenant, name); err != nil {
			return nil, problem.Wrap(problem.Internal, "Could not read the projection's config", err)
		}
	case err != nil:
		return nil, problem.Wrap(problem.Internal, "Could not read the projection's config", err)
	}
	if c == nil || c.Type != ConfigType || c.Status != store.ConfigActive {
		return nil, nil
	}
	t := s.apply(ctx, c)
	if t == nil || s.currentOf(t) == nil {
		return nil, problem.New(problem.Unavailable, "Projections are not running yet")
	}
	return t, nil
}

// confirm holds a running projection against its config in the store, so
// that a query answers as the last acknowledged config change says
// rather than as the background sync last saw it (up to SyncInterval
// behind): archived, or renamed when found by its old name (byName), it
// is not found; at a newer version, that version is applied now (queries
// read the version before it until it has caught up, as always). The
// store unreadable, the running projection answers.
func (s *Service) confirm(ctx context.Context, tenant, id, byName string, t *tracked) *tracked {
	c, err := s.opts.Store.GetConfig(ctx, tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return t
	case c.Type != ConfigType || c.Status != store.ConfigActive:
		return nil
	case byName != "" && c.Name != byName:
		return nil
	case c.Version > s.currentOf(t).versionOrZero():
		if n := s.apply(ctx, c); n != nil && s.currentOf(n) != nil {
			return n
		}
	}
	return t
}

// versionOrZero is the runtime's config version, 0 for none.
func (rt *runtime) versionOrZero() int64 {
	if rt == nil {
		return 0
	}
	return rt.version
}

// currentOf reads t's current runtime, which apply replaces under s.mu
// (a background sync may do so while a query looks).
func (s *Service) currentOf(t *tracked) *runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.current
}

// queryError turns an engine error into a problem.
func queryError(name string, mode projection.QueryMode, err error) error {
	msg := strings.TrimPrefix(err.Error(), "projection: ")
	switch {
	case errors.Is(err, projection.ErrNotMaterialized):
		return problem.Newf(problem.BadRequest, "Projection %s is not materialized (materialize: false); query it with filters.mode compute", name)
	case errors.Is(err, projection.ErrRangeWithoutWindow):
		return problem.Newf(problem.BadRequest, "Projection %s has no timeWindow: a time range needs filters.mode compute", name)
	case errors.Is(err, projection.ErrBadQuery):
		return problem.New(problem.BadRequest, "Invalid projection query: "+msg)
	}
	// The facts could not be read: the database, not the cached state,
	// is what to wait for (the gateway says so), whatever the mode.
	if errors.Is(err, store.ErrUnavailable) || mode == projection.ModeCompute {
		return err
	}
	// What is left is the cached state failing to answer (Redis down or
	// timing out); the facts may still be read.
	return problem.Wrap(problem.Unavailable, "Projection state is unavailable; retry, or query with filters.mode compute", err)
}

var filterKeys = []string{"from", "to", "aggregate", "mode", "groups"}

// parseFilters reads the query action's filters into query options,
// reporting every bad filter.
func parseFilters(filters map[string]any, cfg *projection.Config) (projection.QueryOptions, error) {
	q := projection.QueryOptions{Mode: projection.ModeMaterialized}
	var errs []problem.FieldError
	bad := func(field, code, format string, args ...any) {
		errs = append(errs, problem.FieldError{Field: "filters." + field, Code: code, Message: fmt.Sprintf(format, args...)})
	}
	groups := map[string]string{}
	addGroup := func(field, path string, v any) {
		if !slices.Contains(cfg.GroupBy, field) {
			bad(path, problem.CodeUnknownField, "%s is not a groupBy field of the projection (groupBy: %s)", field, strings.Join(cfg.GroupBy, ", "))
			return
		}
		s, ok := groupValue(v)
		if !ok {
			bad(path, problem.CodeType, "a group value must be a string, number or boolean")
			return
		}
		if prev, twice := groups[field]; twice && prev != s {
			bad(path, problem.CodeFormat, "%s is given twice, in groups and on its own, with different values (%q, %q); give it once", field, prev, s)
			return
		}
		groups[field] = s
	}
	keys := make([]string, 0, len(filters))
	for k := range filters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := filters[k]
		switch k {
		case "from", "to":
			ms, code, msg := parseTime(v, k == "from")
			switch {
			case msg != "":
				bad(k, code, "%s", msg)
			case k == "from":
				q.From = ms // 0, the epoch, leaves the start open: no fact is older
			case ms == 0:
				// The engine reads 0 as an open end, the opposite of what
				// a range ending at the epoch asks for.
				bad(k, problem.CodeRange, "to must be after the epoch; leave it out for an open end")
			default:
				q.To = ms
			}
		case "aggregate":
			b, ok := v.(bool)
			if !ok {
				bad(k, problem.CodeType, "aggregate must be a boolean")
			}
			q.Aggregate = b
		case "mode":
			m, _ := v.(string)
			switch projection.QueryMode(m) {
			case projection.ModeMaterialized, projection.ModeCompute, projection.ModeVerify:
				q.Mode = projection.QueryMode(m)
			default:
				bad(k, problem.CodeEnum, "mode must be materialized, compute or verify")
			}
		case "groups":
			obj, ok := v.(map[string]any)
			if !ok {
				bad(k, problem.CodeType, "groups must be an object of groupBy field to value")
				continue
			}
			for _, f := range sortedKeys(obj) {
				addGroup(f, "groups."+f, obj[f])
			}
		default:
			if slices.Contains(cfg.GroupBy, k) {
				addGroup(k, k, v)
				continue
			}
			bad(k, problem.CodeUnknownField, "unknown filter %s (filters: %s, or a groupBy field)", k, strings.Join(filterKeys, ", "))
		}
	}
	if len(errs) == 0 && q.From != 0 && q.To != 0 && q.From > q.To {
		bad("from", problem.CodeRange, "from (%d) is after to (%d)", q.From, q.To)
	}
	if len(errs) > 0 {
		return q, problem.Validation(errs)
	}
	if len(groups) > 0 {
		q.Groups = groups
	}
	return q, nil
}

// timeLayouts are the text forms of from and to: RFC 3339 and the bucket
// key formats, read in UTC, each with the period a bucket key names (zero
// for RFC 3339, which names an instant).
var timeLayouts = []struct {
	layout string
	period func(time.Time) time.Time // the start of the next period
}{
	{time.RFC3339Nano, nil},
	{"2006-01-02T15:04", func(t time.Time) time.Time { return t.Add(time.Minute) }},
	{"2006-01-02T15", func(t time.Time) time.Time { return t.Add(time.Hour) }},
	{"2006-01-02", func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }},
	{"2006-01", func(t time.Time) time.Time { return t.AddDate(0, 1, 0) }},
}

// parseTime reads a time filter: milliseconds since the epoch, or text.
// It returns the problem code and message when v is neither, or a time
// before the epoch. Text finer than a millisecond is rounded up for the
// start of a range (ceil) and down for its end, so the range never takes
// in a bucket that starts outside it. A bucket key as the end of a range
// takes in the whole period it names ("to": "2024-01-15" is the day's
// last millisecond), as a reader of the key means it; as the start it is
// the period's first millisecond.
func parseTime(v any, start bool) (ms int64, code, msg string) {
	const (
		notATime    = "must be milliseconds since the epoch or an RFC 3339 / bucket-key time such as 2024-01-15T10:30"
		beforeEpoch = "must not be before the epoch, 1970-01-01T00:00:00Z (no fact is older)"
	)
	inRange := func(ms int64) (int64, string, string) {
		if ms < 0 {
			return 0, problem.CodeRange, beforeEpoch
		}
		return ms, "", ""
	}
	// A whole number beyond int64 (1e20, 99999999999999999999) is a
	// time, just out of range: a range problem, not a type one.
	beyond := func(f float64) (int64, string, string) {
		if f < 0 {
			return 0, problem.CodeRange, beforeEpoch
		}
		return 0, problem.CodeRange, fmt.Sprintf("is out of range: milliseconds since the epoch must be at most %d", int64(math.MaxInt64))
	}
	switch x := v.(type) {
	case json.Number:
		if ms, ok := platform.WholeNumber(x); ok {
			return inRange(ms)
		}
		// The body was checked before (store.Inspect): its numbers are
		// finite as a float64.
		if f, err := strconv.ParseFloat(string(x), 64); (err == nil || errors.Is(err, strconv.ErrRange)) && math.Abs(f) >= 1<<63 {
			return beyond(f)
		}
		return 0, problem.CodeType, notATime
	case float64:
		if math.Abs(x) >= 1<<63 && !math.IsInf(x, 0) {
			return beyond(x)
		}
		if x != float64(int64(x)) {
			return 0, problem.CodeType, notATime
		}
		return inRange(int64(x))
	case string:
		// A query string's integer too large for int64 stays text.
		if _, err := strconv.ParseInt(x, 10, 64); errors.Is(err, strconv.ErrRange) {
			if strings.HasPrefix(x, "-") {
				return beyond(-1)
			}
			return beyond(1)
		}
		x = platform.UpperRFC3339(x)
		for _, l := range timeLayouts {
			t, err := time.ParseInLocation(l.layout, x, time.UTC)
			if err == nil && l.period == nil {
				_, err = platform.ParseRFC3339(x) // its offset too
			}
			if err != nil {
				continue
			}
			ms := t.UnixMilli()
			switch {
			case start && ms >= 0 && t.Nanosecond()%int(time.Millisecond) != 0:
				ms++
			case !start && l.period != nil:
				ms = l.period(t).UnixMilli() - 1
			}
			return inRange(ms)
		}
		// Text that is no time is of the right type, in the wrong form
		// (format, as GET /v1/facts says of it).
		return 0, problem.CodeFormat, notATime
	}
	return 0, problem.CodeType, notATime
}

func groupValue(v any) (string, bool) {
	switch v.(type) {
	case string, json.Number, float64, bool:
		return projection.GroupValue(v), true
	}
	return "", false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// onlyFilters reads the body of the query endpoint: {filters?: object}.
func onlyFilters(body map[string]any, filters *map[string]any) error {
	var errs []problem.FieldError
	for k, v := range body {
		if k != "filters" {
			errs = append(errs, problem.FieldError{Field: k, Code: problem.CodeUnknownField, Message: "unknown field " + k + " (the body is {filters?: object})"})
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok && v != nil {
			errs = append(errs, problem.FieldError{Field: "filters", Code: problem.CodeType, Message: "filters must be an object"})
			continue
		}
		*filters = obj
	}
	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
		return problem.Validation(errs)
	}
	return nil
}
