package projection

import (
	"sort"
	"strings"
)

// Rows returns the buckets of a result (of a query with the given
// aggregate option) as a list, in bucket-key order, for
// callers that answer with arrays (the gateway's query action). Each row is
// the bucket's object of result keys plus:
//
//   - "key": the bucket key as in the map form (absent for a flat result;
//     "aggregated" for an aggregated one);
//   - "bucket" and "window": the time bucket and its window ("minute" ...;
//     a coarser window when finer buckets were deleted by retention), when
//     the projection has a timeWindow;
//   - "group": groupBy field to (unescaped) group value, when it has
//     groupBy.
//
// Result keys are "count" or end in "_<function>"/"_distinct", so these
// names never collide with them. "_meta" is not a bucket and is left out.
func (e *Engine) Rows(r Result, aggregate bool) []map[string]any {
	if aggregate {
		obj, _ := r["aggregated"].(map[string]any)
		return []map[string]any{withKey(obj, "key", "aggregated")}
	}
	if e.s.flat() {
		row := make(map[string]any, len(r))
		for k, v := range r {
			if k != "_meta" {
				row[k] = v
			}
		}
		return []map[string]any{row}
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		if k != "_meta" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	rows := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		obj, _ := r[k].(map[string]any)
		row := withKey(obj, "key", k)
		bucket, groups := e.SplitKey(k)
		if e.cfg.TimeWindow != "" {
			row["bucket"] = bucket
			row["window"] = string(windowOfKey(bucket))
		}
		if len(e.cfg.GroupBy) > 0 {
			g := make(map[string]any, len(groups))
			for field, v := range groups {
				g[field] = v
			}
			row["group"] = g
		}
		rows = append(rows, row)
	}
	return rows
}

// SplitKey splits a bucket key into its time bucket ("" without a
// timeWindow) and its group values by groupBy field (nil without
// groupBy). Group values are escaped in keys (see the package doc), so
// the split is unambiguous.
func (e *Engine) SplitKey(key string) (bucket string, groups map[string]string) {
	n := len(e.cfg.GroupBy)
	if n == 0 {
		return key, nil
	}
	parts := strings.Split(key, ":")
	if len(parts) < n {
		return "", nil
	}
	vals := parts[len(parts)-n:]
	groups = make(map[string]string, n)
	for i, field := range e.cfg.GroupBy {
		groups[field] = UnescapeGroup(vals[i])
	}
	return strings.Join(parts[:len(parts)-n], ":"), groups
}

// windowOfKey names the window of a time bucket key by its length.
func windowOfKey(bucket string) Window {
	for _, w := range []Window{Minute, Hour, Day, Month} {
		if len(bucket) == w.bucketLen() {
			return w
		}
	}
	return ""
}

func withKey(obj map[string]any, name, key string) map[string]any {
	row := make(map[string]any, len(obj)+4)
	for k, v := range obj {
		row[k] = v
	}
	row[name] = key
	return row
}

// GroupValue is the group value a fact field holding v falls under (numbers
// in canonical form: 5.0 and 5 are one group), for callers that build
// QueryOptions.Groups from typed input.
func GroupValue(v any) string { return groupValue(v, true) }
