package projection

import (
	"context"
	"fmt"
	"slices"
	"sort"
)

// QueryMode selects where a query's results come from.
type QueryMode string

// Query modes.
const (
	// ModeMaterialized reads cached state (the default).
	ModeMaterialized QueryMode = "materialized"
	// ModeCompute computes from source facts; cached state is neither read
	// nor written.
	ModeCompute QueryMode = "compute"
	// ModeVerify computes from source and reads cached state, and reports
	// every difference (see VerifyReport).
	ModeVerify QueryMode = "verify"
)

// QueryOptions select what a query returns.
type QueryOptions struct {
	// From and To bound bucket start times, inclusive, in milliseconds;
	// 0 leaves that end open. A bucket is in range when its start is.
	From, To int64
	// Aggregate merges the selected buckets into one object under the key
	// "aggregated": counts and sums added, averages weighted by counts,
	// minimum of minimums, maximum of maximums, distinct counts of the
	// union.
	Aggregate bool
	// Mode is materialized (default), compute or verify.
	Mode QueryMode
	// Groups keeps buckets whose group values equal these (groupBy field
	// to value).
	Groups map[string]string
	// State and Source override the engine's.
	State  CachedState
	Source FactSource
}

// Query returns results for a projection key (see QueryOptions and
// Result). In verify mode the result has "consistent", "computed",
// "materialized" and "drift" (see Verify).
func (e *Engine) Query(ctx context.Context, projectionKey string, q QueryOptions) (Result, error) {
	if q.From != 0 && q.To != 0 && q.From > q.To {
		return nil, fmt.Errorf("%w: from %d is after to %d", ErrBadQuery, q.From, q.To)
	}
	filter, err := e.filter(q.Groups)
	if err != nil {
		return nil, err
	}
	switch q.Mode {
	case "", ModeMaterialized:
		return e.queryMaterialized(ctx, projectionKey, q, filter)
	case ModeCompute:
		return e.queryCompute(ctx, q, filter)
	case ModeVerify:
		rep, err := e.Verify(ctx, projectionKey, q)
		if err != nil {
			return nil, err
		}
		return e.withMeta(rep.result()), nil
	}
	return nil, fmt.Errorf("%w: unknown mode %q (materialized, compute or verify)", ErrBadQuery, q.Mode)
}

func (e *Engine) filter(groups map[string]string) (*groupFilter, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	f := &groupFilter{}
	fields := make([]string, 0, len(groups))
	for k := range groups {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	for _, k := range fields {
		i := slices.Index(e.cfg.GroupBy, k)
		if i < 0 {
			return nil, fmt.Errorf("%w: %q is not a groupBy field", ErrBadQuery, k)
		}
		f.pos = append(f.pos, i)
		f.vals = append(f.vals, escapeGroup(groups[k]))
	}
	return f, nil
}

func (e *Engine) stateFor(q QueryOptions) CachedState {
	if q.State != nil {
		return q.State
	}
	return e.opts.State
}

func (e *Engine) sourceFor(q QueryOptions) FactSource {
	if q.Source != nil {
		return q.Source
	}
	return e.opts.Source
}

func (e *Engine) queryMaterialized(ctx context.Context, key string, q QueryOptions, filter *groupFilter) (Result, error) {
	st := e.stateFor(q)
	if st == nil || key == "" {
		return nil, ErrNoState
	}
	if !e.cfg.Materialize {
		return nil, ErrNotMaterialized
	}
	if e.s.window == "" && (q.From != 0 || q.To != 0) {
		return nil, ErrRangeWithoutWindow
	}
	ld, _, err := e.load(ctx, st, key, q, filter)
	if err != nil {
		return nil, err
	}
	return e.withEstimates(e.withMeta(e.renderLoaded(ld, q.Aggregate)), ld), nil
}

// withEstimates lists under "_meta" "estimated" the count_distinct result
// keys whose values are HyperLogLog estimates: those read rollup buckets.
func (e *Engine) withEstimates(r Result, ld *loaded) Result {
	if !ld.rollups || !e.s.hasDist {
		return r
	}
	var keys []string
	for _, a := range e.s.aggs {
		if a.fn == CountDistinct {
			keys = append(keys, a.key)
		}
	}
	meta, _ := r["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		r["_meta"] = meta
	}
	meta["estimated"] = keys
	return r
}

// Estimated returns the count_distinct result keys a query result's
// "_meta" lists as estimates: values counted from rollup buckets' sketches
// (materialized and verify queries that read rollup buckets).
func Estimated(r Result) []string {
	meta, _ := r["_meta"].(map[string]any)
	keys, _ := meta["estimated"].([]string)
	return keys
}

func (e *Engine) load(ctx context.Context, st CachedState, key string, q QueryOptions, filter *groupFilter) (*loaded, stateMeta, error) {
	a, b := dataRange(e.s, q.From, q.To)
	var ld *loaded
	var meta stateMeta
	err := e.withFormat(ctx, st, key, func(version int) error {
		var err error
		ld, meta, err = st.load(ctx, key, e.s, version, func(m stateMeta) []planRange {
			return makePlan(e.s, m.wm, m.del, a, b, q.Aggregate)
		}, q.Aggregate, filter)
		return err
	})
	return ld, meta, err
}

func (e *Engine) renderLoaded(ld *loaded, aggregate bool) Result {
	return e.s.renderLoaded(ld, aggregate)
}

// factBounds returns the fact times [lo, hi) a query selects.
func (e *Engine) factBounds(q QueryOptions) (int64, int64) {
	if e.s.window != "" {
		return dataRange(e.s, q.From, q.To)
	}
	lo, hi := minTime, maxTime+1
	if q.From != 0 {
		lo = max(q.From, minTime)
	}
	if q.To != 0 {
		hi = min(q.To, maxTime) + 1
	}
	return lo, hi
}

func sourceBounds(lo, hi int64) (from, to int64) {
	if lo > minTime {
		from = lo
	}
	if hi <= maxTime {
		to = hi - 1
	}
	// A bound that happens to be 0 reads as open; the engine filters the
	// facts it receives by time anyway.
	return from, to
}

func (e *Engine) queryCompute(ctx context.Context, q QueryOptions, filter *groupFilter) (Result, error) {
	src := e.sourceFor(q)
	if src == nil {
		return nil, ErrNoSource
	}
	lo, hi := e.factBounds(q)
	b := newBatchAgg(e.s, 0, lo, hi)
	b.filter = filter
	if lo >= hi {
		return e.withMeta(b.render(q.Aggregate)), nil
	}
	from, to := sourceBounds(lo, hi)
	if err := src.Facts(ctx, from, to, func(f Fact) error {
		b.add(&f)
		return nil
	}); err != nil {
		return nil, err
	}
	return e.withMeta(b.render(q.Aggregate)), nil
}

// Entry is a stored projection read back: its value (the materialized
// result) and the id of the newest fact processed.
type Entry struct {
	Value          Result `json:"value"`
	FactsThroughID string `json:"factsThroughId"`
}

// FactsThroughID returns the id of the newest fact the cached state under
// projectionKey holds ("" for none), reading only its metadata.
func (e *Engine) FactsThroughID(ctx context.Context, projectionKey string) (string, error) {
	st := e.opts.State
	if st == nil || projectionKey == "" {
		return "", ErrNoState
	}
	meta, err := st.meta(ctx, projectionKey, e.s)
	if err != nil || meta.version != 1 || meta.through != "" {
		return meta.through, err
	}
	// A blob written before its meta carried factsThroughId.
	var through string
	err = e.withFormat(ctx, st, projectionKey, func(version int) error {
		_, meta, err := st.load(ctx, projectionKey, e.s, version, func(stateMeta) []planRange { return nil }, false, nil)
		through = meta.through
		return err
	})
	return through, err
}

// Entry reads a projection back from cached state in the {value,
// factsThroughId} shape.
func (e *Engine) Entry(ctx context.Context, projectionKey string, st CachedState) (Entry, error) {
	if st == nil {
		st = e.opts.State
	}
	if st == nil || projectionKey == "" {
		return Entry{}, ErrNoState
	}
	ld, meta, err := e.load(ctx, st, projectionKey, QueryOptions{}, nil)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Value: e.withMeta(e.renderLoaded(ld, false)), FactsThroughID: meta.through}, nil
}
