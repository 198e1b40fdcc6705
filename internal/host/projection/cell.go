package projection

import (
	"encoding/json"
	"maps"

	"github.com/factline/factline/internal/host/projection/internal/hll"
)

// cell is the mergeable state of one bucket: the fact count, and per
// field the count of numeric values, their exact sum, minimum and
// maximum, and its distinct values: the values themselves in a base
// bucket, a HyperLogLog sketch in a rollup bucket.
type cell struct {
	n int64
	f []fieldCell
}

type fieldCell struct {
	cnt    int64 // numeric values seen
	sum    number
	lo, hi number // valid when cnt > 0
	// vals holds the distinct values themselves, so that base buckets and
	// unions of them count exactly. A cell that is or takes in a rollup
	// bucket is approx: its distinct values are the sketch hll (the
	// contract allows a HyperLogLog in rollups only).
	vals   map[string]struct{}
	hll    *hll.Sketch
	approx bool
	// dcount is the distinct count when the values stayed in Redis.
	dcount int64
	dset   bool
}

func newCell(s *schema) *cell {
	return &cell{f: make([]fieldCell, len(s.fields))}
}

// newRollupCell returns the empty cell of a rollup bucket: its distinct
// values are a sketch from the start.
func newRollupCell(s *schema) *cell {
	c := newCell(s)
	c.markRollup()
	return c
}

// markRollup marks an empty cell as a rollup bucket's.
func (c *cell) markRollup() {
	for i := range c.f {
		c.f[i].approx = true
	}
}

// addDistinct adds one distinct value.
func (fc *fieldCell) addDistinct(v string) {
	if fc.approx {
		if fc.hll == nil {
			fc.hll = &hll.Sketch{}
		}
		fc.hll.AddString(v)
		return
	}
	if fc.vals == nil {
		fc.vals = map[string]struct{}{}
	}
	fc.vals[v] = struct{}{}
}

// toSketch turns the distinct values into a sketch, for a union with a
// rollup bucket.
func (fc *fieldCell) toSketch() {
	if fc.approx {
		return
	}
	fc.approx = true
	if len(fc.vals) > 0 {
		if fc.hll == nil {
			fc.hll = &hll.Sketch{}
		}
		for v := range fc.vals {
			fc.hll.AddString(v)
		}
	}
	fc.vals = nil
}

// mergeDistinct adds the distinct values of o.
func (fc *fieldCell) mergeDistinct(o *fieldCell) {
	if o.approx {
		fc.toSketch()
		if o.hll != nil {
			if fc.hll == nil {
				fc.hll = &hll.Sketch{}
			}
			fc.hll.Merge(o.hll)
		}
		return
	}
	for v := range o.vals {
		fc.addDistinct(v)
	}
}

// add adds one fact's values.
func (c *cell) add(s *schema, vals []fieldVal) {
	c.n++
	for i := range s.fields {
		fs, v, fc := &s.fields[i], &vals[i], &c.f[i]
		if fs.numeric && v.isNum {
			if fc.cnt == 0 {
				fc.lo, fc.hi = v.num, v.num
			} else if fs.minmax {
				if cmpNumbers(v.num, fc.lo) < 0 {
					fc.lo = v.num
				}
				if cmpNumbers(v.num, fc.hi) > 0 {
					fc.hi = v.num
				}
			}
			fc.cnt++
			if fs.sum {
				fc.sum = addNumbers(fc.sum, v.num)
			}
		}
		if fs.distinct && v.hasElem {
			fc.addDistinct(v.elem)
		}
	}
}

// merge adds the state of o (a rollup or an aggregate).
func (c *cell) merge(s *schema, o *cell) {
	c.n += o.n
	for i := range s.fields {
		fc, oc := &c.f[i], &o.f[i]
		if oc.cnt > 0 {
			if fc.cnt == 0 {
				fc.lo, fc.hi = oc.lo, oc.hi
			} else {
				if cmpNumbers(oc.lo, fc.lo) < 0 {
					fc.lo = oc.lo
				}
				if cmpNumbers(oc.hi, fc.hi) > 0 {
					fc.hi = oc.hi
				}
			}
			fc.cnt += oc.cnt
			fc.sum = addNumbers(fc.sum, oc.sum)
		}
		if s.fields[i].distinct {
			fc.mergeDistinct(oc)
		}
	}
}

func (c *cell) clone() *cell {
	d := &cell{n: c.n, f: append([]fieldCell(nil), c.f...)}
	for i := range d.f {
		if d.f[i].hll != nil {
			d.f[i].hll = d.f[i].hll.Clone()
		}
		if d.f[i].vals != nil {
			d.f[i].vals = maps.Clone(d.f[i].vals)
		}
	}
	return d
}

// snapshot returns a copy of the cell to render: distinct values are
// copied as their count, not value by value.
func (c *cell) snapshot() *cell {
	d := &cell{n: c.n, f: append([]fieldCell(nil), c.f...)}
	for i := range d.f {
		fc := &d.f[i]
		if fc.vals != nil || fc.hll != nil {
			fc.dcount, fc.dset = fc.distinct(), true
			fc.vals, fc.hll = nil, nil
		}
	}
	return d
}

// render returns the result object of a cell. Numbers are exact: count and
// distinct counts are int64, sums, averages, minimums and maximums are
// json.Number; an average, minimum or maximum without any numeric value is
// nil.
func (c *cell) render(s *schema) map[string]any {
	out := make(map[string]any, len(s.aggs))
	// The numbers of a bucket share one string allocation.
	var buf [160]byte
	text := buf[:0]
	type pending struct {
		key        string
		start, end int
	}
	var nums [8]pending
	queued := nums[:0]
	for i := range s.aggs {
		a := &s.aggs[i]
		v, n, isNum := c.value(a)
		if !isNum {
			out[a.key] = v
			continue
		}
		start := len(text)
		text = n.appendText(text)
		queued = append(queued, pending{a.key, start, len(text)})
	}
	if len(queued) > 0 {
		all := string(text)
		for _, q := range queued {
			out[q.key] = json.Number(all[q.start:q.end])
		}
	}
	return out
}

// value returns the result of one aggregation of the cell: a decimal n
// (isNum), or else v.
func (c *cell) value(a *aggSpec) (v any, n number, isNum bool) {
	if a.fn == Count {
		return c.n, number{}, false
	}
	fc := &c.f[a.field]
	switch a.fn {
	case Sum:
		return nil, fc.sum, true
	case Avg:
		if fc.cnt > 0 {
			return nil, fc.sum.divInt(fc.cnt), true
		}
	case Min:
		if fc.cnt > 0 {
			return nil, fc.lo, true
		}
	case Max:
		if fc.cnt > 0 {
			return nil, fc.hi, true
		}
	case CountDistinct:
		return fc.distinct(), number{}, false
	}
	return nil, number{}, false
}

// appendText appends n in canonical form.
func (n number) appendText(dst []byte) []byte {
	if n.b == nil && n.scale <= 18 {
		return n.appendSmall(dst)
	}
	return append(dst, n.String()...)
}

// renderBatch is how many buckets a renderer renders between string
// conversions.
const renderBatch = 64

// renderer renders many cells as render does, the numbers of up to
// renderBatch cells sharing one string allocation. A rendered object is
// complete once flush has run.
type renderer struct {
	s      *schema
	text   []byte
	queued []pendingNumber
	cells  int
}

type pendingNumber struct {
	out        map[string]any
	key        string
	start, end int
}

func (r *renderer) render(c *cell) map[string]any {
	s := r.s
	out := make(map[string]any, len(s.aggs))
	for i := range s.aggs {
		a := &s.aggs[i]
		v, n, isNum := c.value(a)
		if !isNum {
			out[a.key] = v
			continue
		}
		start := len(r.text)
		r.text = n.appendText(r.text)
		r.queued = append(r.queued, pendingNumber{out, a.key, start, len(r.text)})
	}
	if r.cells++; r.cells == renderBatch {
		r.flush()
	}
	return out
}

// flush completes the objects rendered since the last flush.
func (r *renderer) flush() {
	r.cells = 0
	if len(r.queued) == 0 {
		return
	}
	all := string(r.text)
	for _, q := range r.queued {
		q.out[q.key] = json.Number(all[q.start:q.end])
	}
	clear(r.queued)
	r.text, r.queued = r.text[:0], r.queued[:0]
}

func (fc *fieldCell) distinct() int64 {
	switch {
	case fc.dset:
		return fc.dcount
	case fc.approx:
		if fc.hll == nil {
			return 0
		}
		return int64(fc.hll.Count())
	}
	return int64(len(fc.vals))
}
