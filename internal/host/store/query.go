package store

import (
	"fmt"
	"strings"
)

// Query pieces both drivers use, written once; a driver only writes its
// own placeholders ($n or ?) and the SQL its dialect spells differently.

// Cond is one condition a filter adds to a query: SQL up to its operator
// ("type ="), to be followed by a placeholder that binds Arg.
type Cond struct {
	SQL string
	Arg any
}

// Conds returns the conditions f adds to its tenant's, in the order the
// drivers write them.
func (f *FactFilter) Conds() []Cond {
	var cs []Cond
	if f.Type != "" {
		cs = append(cs, Cond{`type =`, f.Type})
		if f.Subtype != "" {
			cs = append(cs, Cond{`subtype =`, f.Subtype})
		}
	}
	if f.SourceID != "" {
		cs = append(cs, Cond{`source_id =`, f.SourceID})
	}
	if f.EntityID != "" {
		cs = append(cs, Cond{`entity_id =`, f.EntityID})
	}
	cs = append(cs, timeConds(f.From, f.To)...)
	if f.AfterPosition > 0 {
		cs = append(cs, Cond{`position >`, f.AfterPosition})
	}
	return cs
}

// Conds returns the conditions q adds to its tenant's and types'.
func (q *FactScan) Conds() []Cond {
	var cs []Cond
	if q.EntityType != "" {
		cs = append(cs, Cond{`entity_type =`, q.EntityType})
	}
	return append(cs, timeConds(q.From, q.To)...)
}

// Conds returns the conditions f adds to its tenant's latest versions.
func (f *ConfigFilter) Conds() []Cond {
	var cs []Cond
	if f.Type != "" {
		cs = append(cs, Cond{`type =`, f.Type})
	}
	if f.Status != "" {
		cs = append(cs, Cond{`status =`, f.Status})
	}
	if f.AfterID != "" {
		cs = append(cs, Cond{`id >`, f.AfterID})
	}
	return cs
}

func timeConds(from, to int64) []Cond {
	var cs []Cond
	if from != 0 {
		cs = append(cs, Cond{`timestamp >=`, from})
	}
	if to != 0 {
		cs = append(cs, Cond{`timestamp <=`, to})
	}
	return cs
}

// Rows is what both drivers' result sets offer.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// TypeUsageCounts is the select list of the row [ScanTypeUsage] reads: the
// number of entities, then per slot column the number with a value.
func TypeUsageCounts() string {
	cols := SlotColumns()
	counts := make([]string, len(cols))
	for i, c := range cols {
		counts[i] = "count(" + c + ")"
	}
	return "count(*), " + strings.Join(counts, ", ")
}

// ScanTypeUsage reads the row of [TypeUsageCounts] through scan (a row's
// Scan method) into a TypeUsage whose Keys are still empty.
func ScanTypeUsage(scan func(dest ...any) error) (*TypeUsage, error) {
	u := &TypeUsage{Keys: map[string]int64{}, Slots: map[string]int64{}}
	cols := SlotColumns()
	vals := make([]int64, len(cols))
	dest := []any{&u.Entities}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	if err := scan(dest...); err != nil {
		return nil, err
	}
	for i, c := range cols {
		if vals[i] > 0 {
			u.Slots[c] = vals[i]
		}
	}
	return u, nil
}

// AddKeys reads (key, count) rows into u.Keys.
func (u *TypeUsage) AddKeys(rows Rows) error {
	for rows.Next() {
		var (
			k string
			n int64
		)
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		u.Keys[k] = n
	}
	return rows.Err()
}

// ScanCounts reads rows of (key, count) into a map.
func ScanCounts(rows Rows) (map[string]int64, error) {
	counts := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		counts[k] = n
	}
	return counts, rows.Err()
}

// ScanLayerDigests reads rows of (name, sha256) of the stored domain
// manifests, by name, and fails with ErrVersionConflict unless their
// LayersDigest is expect.
func ScanLayerDigests(rows Rows, expect string) error {
	var cur []DomainLayer
	for rows.Next() {
		var l DomainLayer
		if err := rows.Scan(&l.Name, &l.SHA256); err != nil {
			return err
		}
		cur = append(cur, l)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if LayersDigest(cur) != expect {
		return fmt.Errorf("the stored domain manifests changed since they were read: %w", ErrVersionConflict)
	}
	return nil
}
