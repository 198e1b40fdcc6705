package projection

import "strings"

// planRange selects the buckets of one level whose start lies in [lo, hi).
type planRange struct {
	level  int
	lo, hi int64
}

// dataRange returns the time span [a, b) of the base buckets whose start
// lies in [from, to] (0 meaning open).
func dataRange(s *schema, from, to int64) (a, b int64) {
	a, b = minTime, maxTime+1
	base := s.levels[0]
	if base == windowAll {
		return a, b
	}
	if from != 0 {
		a = base.ceil(clampTime(from))
		if from > maxTime {
			a = maxTime + 1
		}
	}
	if to != 0 {
		if to < minTime {
			b = minTime
		} else {
			b = base.next(base.start(clampTime(to)))
		}
	}
	return a, b
}

// makePlan returns the ranges answering a query over [a, b): base buckets
// where they are kept; where retention deleted them, the finest coarser
// buckets that remain. With aggregate, whole coarser buckets replace
// their children wherever they cover them exactly (months, then days,
// then hours, finer buckets only at the edges).
func makePlan(s *schema, wm, del []int64, a, b int64, aggregate bool) []planRange {
	var plan []planRange
	add := func(r planRange) {
		if r.lo < r.hi {
			plan = append(plan, r)
		}
	}
	k := len(s.levels) - 1
	var ranges []planRange
	ranges = append(ranges, planRange{0, max(a, del[0]), b})
	upper := min(b, del[0])
	for j := 1; j <= k; j++ {
		w := s.levels[j]
		lo := max(a, del[j])
		hi := min(upper, wm[j])
		if lo < hi {
			ranges = append(ranges, planRange{j, w.ceil(lo), w.ceil(hi)})
		}
		upper = min(upper, del[j])
	}
	for _, r := range ranges {
		if r.lo >= r.hi {
			continue
		}
		if !aggregate {
			add(r)
			continue
		}
		coverUp(s, wm, del, r.level, r.lo, r.hi, add)
	}
	return plan
}

// coverUp covers [lo, hi) (aligned to level j) with the coarsest sealed
// buckets that fit inside it.
func coverUp(s *schema, wm, del []int64, j int, lo, hi int64, add func(planRange)) {
	if j+1 >= len(s.levels) {
		add(planRange{j, lo, hi})
		return
	}
	p := s.levels[j+1]
	c := p.ceil(lo)
	if del[j+1] != noTime {
		c = max(c, p.ceil(del[j+1]))
	}
	d := p.start(hi)
	if wm[j+1] == noTime {
		d = noTime
	} else {
		d = min(d, wm[j+1])
	}
	if c >= d {
		add(planRange{j, lo, hi})
		return
	}
	add(planRange{j, lo, c})
	coverUp(s, wm, del, j+1, c, d, add)
	add(planRange{j, d, hi})
}

// groupFilter keeps buckets whose group values equal the given ones.
type groupFilter struct {
	pos  []int    // index into groupBy
	vals []string // escaped values
}

func (f *groupFilter) match(w Window, mem string) bool {
	if f == nil || len(f.pos) == 0 {
		return true
	}
	parts := strings.Split(memberGroups(w, mem), ":")
	for i, p := range f.pos {
		if p >= len(parts) || parts[p] != f.vals[i] {
			return false
		}
	}
	return true
}
