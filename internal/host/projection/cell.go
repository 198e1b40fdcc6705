package projection

import (
	"encoding/json"

	"github.com/factline/factline/internal/host/projection/internal/hll"
)

// cell is the mergeable state of one bucket: the fact count, and per
// field the count of numeric values, their exact sum, minimum and
// maximum, and a HyperLogLog sketch of distinct values.
type cell struct {
	n int64
	f []fieldCell
}

type fieldCell struct {
	cnt    int64 // numeric values seen
	sum    number
	lo, hi number // valid when cnt > 0
	hll    *hll.Sketch
	// dcount is the distinct count when the sketch stayed in Redis.
	dcount int64
	dset   bool
}

func newCell(s *schema) *cell {
	return &cell{f: make([]fieldCell, len(s.fields))}
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
			if fc.hll == nil {
				fc.hll = &hll.Sketch{}
			}
			fc.hll.AddString(v.elem)
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
		if oc.hll != nil {
			if fc.hll == nil {
				fc.hll = &hll.Sketch{}
			}
			fc.hll.Merge(oc.hll)
		}
	}
}

func (c *cell) clone() *cell {
	d := &cell{n: c.n, f: append([]fieldCell(nil), c.f...)}
	for i := range d.f {
		if d.f[i].hll != nil {
			d.f[i].hll = d.f[i].hll.Clone()
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
	if fc.hll != nil {
		return int64(fc.hll.Count())
	}
	return fc.dcount
}
