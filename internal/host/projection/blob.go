package projection

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/factline/factline/internal/host/projection/internal/hll"
)

// The format-1 blob is one JSON document per projection key:
//
//	{"value": <the materialized result>, "factsThroughId": "...",
//	 "state": {"fp": ..., "wm": [...], "del": [...], "levels": [...]}}
//
// value and factsThroughId are the stored entry of the contract; state
// holds what incremental processing and rollups need to go on exactly
// (counts, exact sums, minimums, maximums and HyperLogLog registers of
// every bucket of every level).

type blobDoc struct {
	Value          json.RawMessage `json:"value"`
	FactsThroughID string          `json:"factsThroughId"`
	State          *blobState      `json:"state"`
}

type blobState struct {
	Fingerprint string      `json:"fp"`
	WM          []int64     `json:"wm"`
	Del         []int64     `json:"del"`
	Levels      []blobLevel `json:"levels"`
}

type blobLevel struct {
	Window  Window       `json:"window"`
	Buckets []blobBucket `json:"buckets"`
}

type blobBucket struct {
	Key   string      `json:"k"`
	Start int64       `json:"t"`
	N     int64       `json:"n"`
	F     []blobField `json:"f,omitempty"`
}

type blobField struct {
	Cnt int64  `json:"c,omitempty"`
	Sum string `json:"s,omitempty"`
	Lo  string `json:"lo,omitempty"`
	Hi  string `json:"hi,omitempty"`
	HLL []byte `json:"h,omitempty"`
	// Vals are the distinct values of a base bucket, sorted.
	Vals []string `json:"v,omitempty"`
}

// encodeBlob renders the model as a format-1 blob.
func encodeBlob(s *schema, m *model) ([]byte, error) {
	plan := makePlan(s, m.wm, m.del, minTime, maxTime+1, false)
	value, err := json.Marshal(s.renderLoaded(m.load(s, plan, false, nil), false))
	if err != nil {
		return nil, err
	}
	st := &blobState{Fingerprint: s.fingerprint, WM: m.wm, Del: m.del}
	for j, l := range m.levels {
		bl := blobLevel{Window: s.levels[j], Buckets: make([]blobBucket, 0, len(l.m))}
		for _, sc := range l.scores {
			mems := append([]string(nil), l.at[sc]...)
			sort.Strings(mems)
			for _, mem := range mems {
				e := l.m[mem]
				bb := blobBucket{Key: mem, Start: e.score, N: e.c.n}
				if len(s.fields) > 0 {
					bb.F = make([]blobField, len(s.fields))
				}
				for i := range s.fields {
					fc, bf := &e.c.f[i], &bb.F[i]
					bf.Cnt = fc.cnt
					if fc.cnt > 0 {
						if s.fields[i].sum {
							bf.Sum = fc.sum.String()
						}
						if s.fields[i].minmax {
							bf.Lo, bf.Hi = fc.lo.String(), fc.hi.String()
						}
					}
					if fc.hll != nil {
						bf.HLL, _ = fc.hll.MarshalBinary()
					}
					if len(fc.vals) > 0 {
						bf.Vals = slices.Sorted(maps.Keys(fc.vals))
					}
				}
				bl.Buckets = append(bl.Buckets, bb)
			}
		}
		st.Levels = append(st.Levels, bl)
	}
	return json.Marshal(blobDoc{Value: value, FactsThroughID: m.through, State: st})
}

// decodeBlob reads a format-1 blob into a model.
func decodeBlob(s *schema, b []byte) (*model, string, error) {
	var doc blobDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, "", fmt.Errorf("projection: corrupt blob: %w", err)
	}
	m := newModel(s)
	m.through = doc.FactsThroughID
	st := doc.State
	if st == nil {
		return nil, "", fmt.Errorf("projection: blob without state")
	}
	if err := checkFingerprint(s, st.Fingerprint); err != nil {
		return nil, "", err
	}
	if len(st.Levels) != len(s.levels) || len(st.WM) != len(s.levels) || len(st.Del) != len(s.levels) {
		return nil, "", fmt.Errorf("projection: blob levels do not match the configuration")
	}
	copy(m.wm, st.WM)
	copy(m.del, st.Del)
	for j, bl := range st.Levels {
		for _, bb := range bl.Buckets {
			e := m.levels[j].get(s, bb.Key, bb.Start)
			e.c.n = bb.N
			for i := range s.fields {
				if i >= len(bb.F) {
					break
				}
				bf, fc := &bb.F[i], &e.c.f[i]
				fc.cnt = bf.Cnt
				var ok bool
				if bf.Sum != "" {
					if fc.sum, ok = parseStored(bf.Sum); !ok {
						return nil, "", fmt.Errorf("projection: corrupt blob sum %q", bf.Sum)
					}
				}
				if bf.Lo != "" {
					if fc.lo, ok = parseStored(bf.Lo); !ok {
						return nil, "", fmt.Errorf("projection: corrupt blob minimum %q", bf.Lo)
					}
				}
				if bf.Hi != "" {
					if fc.hi, ok = parseStored(bf.Hi); !ok {
						return nil, "", fmt.Errorf("projection: corrupt blob maximum %q", bf.Hi)
					}
				}
				for _, v := range bf.Vals {
					fc.addDistinct(v)
				}
				if len(bf.HLL) > 0 {
					sk := &hll.Sketch{}
					if err := sk.UnmarshalBinary(bf.HLL); err != nil {
						return nil, "", fmt.Errorf("projection: corrupt blob sketch: %w", err)
					}
					fc.mergeDistinct(&fieldCell{approx: true, hll: sk})
				}
			}
		}
	}
	return m, st.Fingerprint, nil
}
