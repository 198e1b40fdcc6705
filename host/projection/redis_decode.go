package projection

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Decoding bucket hashes and load replies.

// cellSlab hands out cells from shared arrays, to decode many buckets
// with few allocations.
type cellSlab struct {
	cells  []cell
	fields []fieldCell
}

func (sl *cellSlab) next(s *schema) *cell {
	if len(sl.cells) == 0 {
		sl.cells = make([]cell, 256)
		sl.fields = make([]fieldCell, 256*len(s.fields))
	}
	c := &sl.cells[0]
	c.f = sl.fields[:len(s.fields):len(s.fields)]
	sl.cells, sl.fields = sl.cells[1:], sl.fields[len(s.fields):]
	return c
}

// cellFromFields decodes a bucket hash (field, value, field, value, ...).
func cellFromFields(s *schema, h []string, names map[string]int) (*cell, error) {
	return cellFromFieldsInto(newCell(s), s, h, names)
}

func cellFromFieldsInto(c *cell, s *schema, h []string, names map[string]int) (*cell, error) {
	type limbKey struct {
		field int
		scale int32
	}
	var limbs map[limbKey]*big.Int
	for i := 0; i+1 < len(h); i += 2 {
		f, v := h[i], h[i+1]
		if f == "n" {
			c.n, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		bar := strings.IndexByte(f, '|')
		if bar < 0 {
			continue
		}
		kind, rest := f[:bar], f[bar+1:]
		switch kind {
		case "c":
			if fi, ok := names[rest]; ok {
				c.f[fi].cnt, _ = strconv.ParseInt(v, 10, 64)
			}
		case "lo", "hi":
			fi, ok := names[rest]
			if !ok {
				continue
			}
			n, ok := parseStored(v)
			if !ok {
				return nil, fmt.Errorf("projection: corrupt bucket value %s=%q", f, v)
			}
			if kind == "lo" {
				c.f[fi].lo = n
			} else {
				c.f[fi].hi = n
			}
		case "s":
			// s|<field>|<scale>|<limb>; the field name has no '|'.
			b1 := strings.IndexByte(rest, '|')
			if b1 < 0 {
				continue
			}
			fi, ok := names[rest[:b1]]
			if !ok {
				continue
			}
			sl := rest[b1+1:]
			b2 := strings.IndexByte(sl, '|')
			if b2 < 0 {
				continue
			}
			sc, err1 := strconv.Atoi(sl[:b2])
			li, err2 := strconv.Atoi(sl[b2+1:])
			lv, err3 := strconv.ParseInt(v, 10, 64)
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("projection: corrupt bucket sum %s=%q", f, v)
			}
			if li == 0 {
				c.f[fi].sum = addNumbers(c.f[fi].sum, number{m: lv, scale: int32(sc)})
				continue
			}
			if limbs == nil {
				limbs = map[limbKey]*big.Int{}
			}
			lk := limbKey{fi, int32(sc)}
			if limbs[lk] == nil {
				limbs[lk] = new(big.Int)
			}
			t := big.NewInt(lv)
			t.Mul(t, new(big.Int).Exp(big.NewInt(limbBase), big.NewInt(int64(li)), nil))
			limbs[lk].Add(limbs[lk], t)
		}
	}
	for lk, m := range limbs {
		c.f[lk.field].sum = addNumbers(c.f[lk.field].sum, normalizeBig(m, lk.scale))
	}
	return c, nil
}

// cellFromHash decodes a bucket hash given as a reply array.
func cellFromHash(s *schema, h []any, names map[string]int) (*cell, error) {
	fields := make([]string, len(h))
	for i, v := range h {
		fields[i], _ = v.(string)
	}
	return cellFromFields(s, fields, names)
}

func fieldNames(s *schema) map[string]int {
	names := make(map[string]int, len(s.fields))
	for i, f := range s.fields {
		names[f.name] = i
	}
	return names
}

func distinctFields(s *schema) (names []string, idx []int) {
	for i, f := range s.fields {
		if f.distinct {
			names = append(names, f.name)
			idx = append(idx, i)
		}
	}
	return names, idx
}
