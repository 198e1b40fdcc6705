package projection

import (
	"encoding/json"

	"github.com/factline/factline/host/projection/internal/hll"
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
	queue := func(key string, n number) {
		start := len(text)
		if n.b == nil && n.scale <= 18 {
			text = n.appendSmall(text)
		} else {
			text = append(text, n.String()...)
		}
		queued = append(queued, pending{key, start, len(text)})
	}
	for _, a := range s.aggs {
		if a.fn == Count {
			out[a.key] = c.n
			continue
		}
		fc := &c.f[a.field]
		switch a.fn {
		case Sum:
			queue(a.key, fc.sum)
		case Avg:
			if fc.cnt == 0 {
				out[a.key] = nil
			} else {
				queue(a.key, fc.sum.divInt(fc.cnt))
			}
		case Min:
			if fc.cnt == 0 {
				out[a.key] = nil
			} else {
				queue(a.key, fc.lo)
			}
		case Max:
			if fc.cnt == 0 {
				out[a.key] = nil
			} else {
				queue(a.key, fc.hi)
			}
		case CountDistinct:
			out[a.key] = fc.distinct()
		}
	}
	if len(queued) > 0 {
		all := string(text)
		for _, q := range queued {
			out[q.key] = json.Number(all[q.start:q.end])
		}
	}
	return out
}

func (fc *fieldCell) distinct() int64 {
	if fc.hll != nil {
		return int64(fc.hll.Count())
	}
	return fc.dcount
}
