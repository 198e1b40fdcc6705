package projection

import (
	"math"
	"slices"
)

// noTime is the watermark of "nothing": no bucket sealed, none deleted.
const noTime = math.MinInt64

// model is the state of one projection held in Go: the memory state, the
// format-1 blob of the Redis state, and what compute and verify build.
//
// Levels: levels[0] holds the base window; with rollups, levels[j] holds
// the j-th coarser window. A bucket of level j >= 1 exists only once it is
// sealed, which happens at the rollup trigger: level j is sealed for buckets
// starting before wm[j]. A fact updates the base bucket and every sealed
// coarser bucket of its time at once. Retention removes the buckets of
// level j starting before del[j].
type model struct {
	levels  []*levelStore
	wm      []int64
	del     []int64
	through string
}

type entry struct {
	score int64
	c     *cell
}

type levelStore struct {
	rollup bool // a coarser level: cells hold distinct values as sketches
	m      map[string]*entry
	scores []int64            // sorted, distinct
	at     map[int64][]string // members per score
}

func newLevelStore(rollup bool) *levelStore {
	return &levelStore{rollup: rollup, m: map[string]*entry{}, at: map[int64][]string{}}
}

func newModel(s *schema) *model {
	m := &model{}
	for j := range s.levels {
		m.levels = append(m.levels, newLevelStore(j > 0))
		m.wm = append(m.wm, noTime)
		m.del = append(m.del, noTime)
	}
	return m
}

func (l *levelStore) get(s *schema, mem string, score int64) *entry {
	if e, ok := l.m[mem]; ok {
		return e
	}
	e := &entry{score: score, c: l.newCell(s)}
	l.m[mem] = e
	if _, ok := l.at[score]; !ok {
		i, _ := slices.BinarySearch(l.scores, score)
		l.scores = slices.Insert(l.scores, i, score)
	}
	l.at[score] = append(l.at[score], mem)
	return e
}

// scan calls fn for the buckets starting in [lo, hi), in time order.
func (l *levelStore) scan(lo, hi int64, fn func(mem string, e *entry)) {
	i, _ := slices.BinarySearch(l.scores, lo)
	for ; i < len(l.scores) && l.scores[i] < hi; i++ {
		mems := l.at[l.scores[i]]
		for _, mem := range mems {
			fn(mem, l.m[mem])
		}
	}
}

// deleteBelow removes the buckets starting before h.
func (l *levelStore) deleteBelow(h int64) int {
	i, _ := slices.BinarySearch(l.scores, h)
	n := 0
	for _, sc := range l.scores[:i] {
		for _, mem := range l.at[sc] {
			delete(l.m, mem)
			n++
		}
		delete(l.at, sc)
	}
	l.scores = slices.Delete(l.scores, 0, i)
	return n
}

func (l *levelStore) count() int { return len(l.m) }

// newCell returns an empty cell of the level.
func (l *levelStore) newCell(s *schema) *cell {
	if l.rollup {
		return newRollupCell(s)
	}
	return newCell(s)
}

// factDelta is what one fact contributes: its bucket at every level and
// its field values.
type factDelta struct {
	id      string
	ts      int64
	members []string
	scores  []int64
	vals    []fieldVal
}

// apply adds a fact to the base bucket and to every sealed, retained
// coarser bucket. The caller has checked that the fact is new.
func (m *model) apply(s *schema, d *factDelta) {
	for j, l := range m.levels {
		if j > 0 && d.ts >= m.wm[j] {
			break // levels above are sealed no later than this one
		}
		if d.ts < m.del[j] {
			continue
		}
		l.get(s, d.members[j], d.scores[j]).c.add(s, d.vals)
	}
}

// applyAll adds a fact to every level regardless of seals (verify builds
// the expected state this way).
func (m *model) applyAll(s *schema, d *factDelta) {
	for j, l := range m.levels {
		l.get(s, d.members[j], d.scores[j]).c.add(s, d.vals)
	}
}

// rollupLimit returns how far level j can be sealed at time now: to the
// start of its current bucket (every bucket before it has ended), and no
// further than its children are complete.
func rollupLimit(s *schema, wm []int64, j int, now int64) int64 {
	limit := s.levels[j].start(clampTime(now))
	if j >= 2 {
		if wm[j-1] == noTime {
			return noTime
		}
		limit = min(limit, s.levels[j].start(wm[j-1]))
	}
	return limit
}

// retentionHorizon returns before which time level j's buckets may be
// deleted at time now, or noTime.
func retentionHorizon(s *schema, wm []int64, j int, now int64) int64 {
	days := s.retention[j]
	if days <= 0 {
		return noTime
	}
	h := s.levels[j].start(clampTime(now - int64(days)*msDay))
	if j+1 < len(s.levels) {
		// Only children of sealed parents, in whole parents.
		if wm[j+1] == noTime {
			return noTime
		}
		h = s.levels[j+1].start(min(h, wm[j+1]))
	}
	return h
}

func clampTime(ms int64) int64 { return min(max(ms, minTime), maxTime) }

// rollupStats reports what a rollup did.
type rollupStats struct {
	Sealed  int // parent buckets written
	Deleted int // buckets removed by retention
}

// rollup seals every level up to now and applies retention.
func (m *model) rollup(s *schema, now int64) rollupStats {
	var st rollupStats
	for j := 1; j < len(m.levels); j++ {
		limit := rollupLimit(s, m.wm, j, now)
		if limit == noTime || limit <= m.wm[j] {
			continue
		}
		pw := s.levels[j]
		child, parent := m.levels[j-1], m.levels[j]
		hasGroups := len(s.groups) > 0
		child.scan(m.wm[j], limit, func(mem string, e *entry) {
			ps := pw.start(e.score)
			pm := member(pw, ps, memberGroups(s.levels[j-1], mem), hasGroups)
			pe := parent.get(s, pm, ps)
			if pe.c.n == 0 {
				st.Sealed++
			}
			pe.c.merge(s, e.c)
		})
		m.wm[j] = limit
	}
	for j := range m.levels {
		h := retentionHorizon(s, m.wm, j, now)
		if h == noTime || h <= m.del[j] {
			continue
		}
		m.del[j] = h
		st.Deleted += m.levels[j].deleteBelow(h)
	}
	return st
}

// load runs a plan over the model.
func (m *model) load(s *schema, plan []planRange, aggregate bool, filter *groupFilter) *loaded {
	out := &loaded{}
	if aggregate {
		out.agg = newCell(s)
	}
	for _, r := range plan {
		w := s.levels[r.level]
		m.levels[r.level].scan(r.lo, r.hi, func(mem string, e *entry) {
			if !filter.match(w, mem) {
				return
			}
			out.rollups = out.rollups || r.level > 0
			if aggregate {
				out.agg.merge(s, e.c)
			} else {
				out.buckets = append(out.buckets, loadedBucket{level: r.level, member: mem, c: e.c})
			}
		})
	}
	return out
}

func (m *model) bucketCount() int {
	n := 0
	for _, l := range m.levels {
		n += l.count()
	}
	return n
}

// loaded is what a query read: buckets, or one aggregated cell.
type loaded struct {
	buckets []loadedBucket
	agg     *cell
	// rollups: a rollup bucket is among those read, so distinct counts
	// are sketch estimates.
	rollups bool
}

type loadedBucket struct {
	level  int
	member string
	c      *cell
	// out is the bucket's rendered result when the loader rendered it
	// already (in parallel with reading).
	out map[string]any
}
