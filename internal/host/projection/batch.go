package projection

// batchKey identifies a base bucket during batch processing.
type batchKey struct {
	start int64
	g     string
}

// batchAgg aggregates facts into base buckets in memory, the fast path of
// Process and compute mode.
type batchAgg struct {
	s     *schema
	cells map[batchKey]*cell
	// Repeated ids: while ids arrive in increasing text order (as a fact
	// stream delivers them) none can repeat, so they are only listed; the
	// first id out of order builds the set.
	ids    []string
	seen   map[string]struct{}
	cache  bucketCache
	vals   []fieldVal
	lo, hi int64 // facts with lo <= timestamp < hi
	filter *groupFilter
}

func newBatchAgg(s *schema, sizeHint int, lo, hi int64) *batchAgg {
	return &batchAgg{
		s: s, cells: make(map[batchKey]*cell), ids: make([]string, 0, sizeHint),
		cache: bucketCache{w: s.window}, lo: lo, hi: hi,
	}
}

func (b *batchAgg) add(f *Fact) {
	if !b.s.wants(f.Type) || f.Timestamp < b.lo || f.Timestamp >= b.hi || !timeInRange(f.Timestamp) {
		return
	}
	if b.seen == nil {
		if n := len(b.ids); n == 0 || f.ID > b.ids[n-1] {
			b.ids = append(b.ids, f.ID)
		} else {
			b.seen = make(map[string]struct{}, 2*n)
			for _, id := range b.ids {
				b.seen[id] = struct{}{}
			}
			b.ids = nil
		}
	}
	if b.seen != nil {
		if _, dup := b.seen[f.ID]; dup {
			return
		}
		b.seen[f.ID] = struct{}{}
	}
	var k batchKey
	if b.s.window != "" {
		k.start = b.s.window.start(f.Timestamp)
	}
	k.g = b.s.groupKey(f)
	if b.filter != nil && !b.filter.match(windowAll, k.g) {
		return
	}
	c := b.cells[k]
	if c == nil {
		c = newCell(b.s)
		b.cells[k] = c
	}
	if len(b.s.fields) == 0 {
		c.n++
		return
	}
	b.vals = b.s.values(f, b.vals)
	c.add(b.s, b.vals)
}

// render renders the buckets, or their aggregate.
func (b *batchAgg) render(aggregate bool) Result {
	s := b.s
	if aggregate {
		agg := newCell(s)
		for _, c := range b.cells {
			agg.merge(s, c)
		}
		return Result{"aggregated": agg.render(s)}
	}
	if s.flat() {
		if c := b.cells[batchKey{}]; c != nil {
			return c.render(s)
		}
		return newCell(s).render(s)
	}
	out := make(Result, len(b.cells))
	hasGroups := len(s.groups) > 0
	for k, c := range b.cells {
		out[member(s.levels[0], k.start, k.g, hasGroups)] = c.render(s)
	}
	return out
}
