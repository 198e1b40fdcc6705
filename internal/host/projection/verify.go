package projection

import (
	"context"
	"reflect"
	"sort"
)

// VerifyReport compares cached state with a computation from source.
type VerifyReport struct {
	// Consistent is true when both agree on every bucket and value.
	Consistent bool
	// Computed and Materialized are the two results, over the same
	// buckets (the materialized query's plan).
	Computed, Materialized Result
	// Drift lists every difference.
	Drift []Drift
}

// Drift is one difference between computed and materialized results.
type Drift struct {
	// Bucket is the bucket key ("" for a flat result, "aggregated" for an
	// aggregate).
	Bucket string `json:"bucket"`
	// Key is the result key, or "" when the whole bucket is missing on one
	// side.
	Key          string `json:"key"`
	Computed     any    `json:"computed"`
	Materialized any    `json:"materialized"`
}

func (r *VerifyReport) result() Result {
	drift := make([]any, len(r.Drift))
	for i, d := range r.Drift {
		drift[i] = map[string]any{"bucket": d.Bucket, "key": d.Key, "computed": d.Computed, "materialized": d.Materialized}
	}
	return Result{"consistent": r.Consistent, "computed": map[string]any(r.Computed),
		"materialized": map[string]any(r.Materialized), "drift": drift}
}

// Verify computes a query from source and from cached state and reports
// any drift. The computation uses the same buckets as the cached state
// (coarser ones where retention removed finer ones), so a consistent
// state shows no drift.
func (e *Engine) Verify(ctx context.Context, projectionKey string, q QueryOptions) (*VerifyReport, error) {
	st := e.stateFor(q)
	if st == nil || projectionKey == "" {
		return nil, ErrNoState
	}
	if !e.cfg.Materialize {
		return nil, ErrNotMaterialized
	}
	src := e.sourceFor(q)
	if src == nil {
		return nil, ErrNoSource
	}
	if e.s.window == "" && (q.From != 0 || q.To != 0) {
		return nil, ErrRangeWithoutWindow
	}
	filter, err := e.filter(q.Groups)
	if err != nil {
		return nil, err
	}
	a, b := dataRange(e.s, q.From, q.To)
	var plan []planRange
	ld, _, err := e.loadWithPlan(ctx, st, projectionKey, a, b, q.Aggregate, filter, &plan)
	if err != nil {
		return nil, err
	}
	// Compute every level from source over the span the plan reads.
	m := newModel(e.s)
	lo, hi := maxTime+1, minTime
	for _, r := range plan {
		lo, hi = min(lo, r.lo), max(hi, r.hi)
	}
	if e.s.window == "" {
		lo, hi = minTime, maxTime+1
	}
	if lo < hi {
		from, to := sourceBounds(lo, hi)
		seen := map[string]struct{}{}
		var batch []Fact
		flush := func() {
			for _, d := range e.deltas(batch) {
				m.applyAll(e.s, d)
			}
			batch = batch[:0]
		}
		if err := src.Facts(ctx, from, to, func(f Fact) error {
			if f.Timestamp < lo || f.Timestamp >= hi {
				return nil
			}
			if _, dup := seen[f.ID]; dup {
				return nil
			}
			seen[f.ID] = struct{}{}
			batch = append(batch, f)
			if len(batch) >= 1024 {
				flush()
			}
			return nil
		}); err != nil {
			return nil, err
		}
		flush()
	}
	computed := e.renderLoaded(m.load(e.s, plan, q.Aggregate, filter), q.Aggregate)
	materialized := e.renderLoaded(ld, q.Aggregate)
	rep := &VerifyReport{Computed: e.withEstimates(e.withMeta(computed), ld), Materialized: e.withEstimates(e.withMeta(materialized), ld)}
	rep.Drift = diff(e.s, computed, materialized)
	rep.Consistent = len(rep.Drift) == 0
	return rep, nil
}

func (e *Engine) loadWithPlan(ctx context.Context, st CachedState, key string, a, b int64, aggregate bool, filter *groupFilter, plan *[]planRange) (*loaded, stateMeta, error) {
	var ld *loaded
	var meta stateMeta
	err := e.withFormat(ctx, st, key, func(version int) error {
		var err error
		ld, meta, err = st.load(ctx, key, e.s, version, func(m stateMeta) []planRange {
			*plan = makePlan(e.s, m.wm, m.del, a, b, aggregate)
			return *plan
		}, aggregate, filter)
		return err
	})
	return ld, meta, err
}

// diff lists the differences between two results of the same shape.
func diff(s *schema, computed, materialized Result) []Drift {
	var out []Drift
	if s.flat() {
		return diffObject("", computed, materialized, out)
	}
	keys := map[string]bool{}
	for k := range computed {
		keys[k] = true
	}
	for k := range materialized {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		c, cok := computed[k].(map[string]any)
		m, mok := materialized[k].(map[string]any)
		if !cok || !mok {
			var cv, mv any
			if cok {
				cv = c
			}
			if mok {
				mv = m
			}
			out = append(out, Drift{Bucket: k, Computed: cv, Materialized: mv})
			continue
		}
		out = diffObject(k, c, m, out)
	}
	return out
}

func diffObject(bucket string, c, m map[string]any, out []Drift) []Drift {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	for k := range m {
		if _, ok := c[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !reflect.DeepEqual(c[k], m[k]) {
			out = append(out, Drift{Bucket: bucket, Key: k, Computed: c[k], Materialized: m[k]})
		}
	}
	return out
}
