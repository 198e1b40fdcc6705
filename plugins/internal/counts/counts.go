// Package counts is a small counter by name (a fact type or subtype) for
// the plugins' states, kept sorted by name so that a state's JSON is the
// same however the counts were reached: {"no_answer":2,"deal_won":1}
// encodes as {"deal_won":1,"no_answer":2}.
package counts

import (
	"slices"
	"strings"

	"github.com/factline/factline/sdk"
)

// Counts counts by name, sorted by name.
type Counts []Count

// Count is one name's count.
type Count struct {
	Name string
	N    int64
}

// Add returns c with one more for name.
func (c Counts) Add(name string) Counts {
	i, found := slices.BinarySearchFunc(c, name, func(x Count, n string) int { return strings.Compare(x.Name, n) })
	if found {
		c[i].N++
		return c
	}
	return slices.Insert(c, i, Count{Name: name, N: 1})
}

// Get returns the count of name.
func (c Counts) Get(name string) int64 {
	if i, found := slices.BinarySearchFunc(c, name, func(x Count, n string) int { return strings.Compare(x.Name, n) }); found {
		return c[i].N
	}
	return 0
}

// DecodeJSON implements sdk.Decodable: an object of counts, in any order.
func (c *Counts) DecodeJSON(d *sdk.Decoder) error {
	*c = (*c)[:0]
	sorted := true
	err := d.Object(func(key []byte) error {
		n, err := d.Int()
		if len(*c) > 0 && (*c)[len(*c)-1].Name >= string(key) {
			sorted = false
		}
		*c = append(*c, Count{Name: string(key), N: n})
		return err
	})
	if !sorted {
		slices.SortStableFunc(*c, func(a, b Count) int { return strings.Compare(a.Name, b.Name) })
		*c = slices.CompactFunc(*c, func(a, b Count) bool { return a.Name == b.Name })
	}
	return err
}

// EncodeJSON implements sdk.Encodable.
func (c Counts) EncodeJSON(e *sdk.Encoder) {
	e.BeginObject()
	for _, x := range c {
		e.Key(x.Name)
		e.Int(x.N)
	}
	e.EndObject()
}
