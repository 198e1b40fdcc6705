package projector

import (
	"sync"
	"sync/atomic"

	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/store"
)

// decodedBatches is how many recent batches factMemo keeps: the shared
// reader's current one, and a few read by runtimes still backfilling.
const decodedBatches = 4

// factMemo decodes each fact's data once for every runtime that handles
// it. The shared reader hands the same batch to every caught-up runtime; a
// hundred projections on one stream would otherwise decode each fact a
// hundred times. Decoded facts are shared read-only: the engine never
// writes to a fact's data.
type factMemo struct {
	decodes atomic.Int64 // facts decoded, for tests

	mu      sync.Mutex
	batches [decodedBatches]*decodedBatch // most recent first
}

// decodedBatch holds the facts at positions first, first+1, ..., each
// decoded on first use.
type decodedBatch struct {
	first int64
	facts []decodedFact
}

type decodedFact struct {
	once sync.Once
	id   string // the fact's id, checked on each use
	f    projection.Fact
	err  error
}

// batch returns the memo of a batch that holds facts (read from the stream,
// so their positions follow one another), made if no recent one does.
func (m *factMemo) batch(facts []store.Fact) *decodedBatch {
	if len(facts) == 0 {
		return nil
	}
	first, last := facts[0].Position, facts[len(facts)-1].Position
	if last < first || last-first >= int64(2*len(facts)) {
		return nil // not a stretch of the stream: nothing to share
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, b := range m.batches {
		if b != nil && b.first <= first && last < b.first+int64(len(b.facts)) {
			copy(m.batches[1:i+1], m.batches[:i])
			m.batches[0] = b
			return b
		}
	}
	b := &decodedBatch{first: first, facts: make([]decodedFact, last-first+1)}
	copy(m.batches[1:], m.batches[:])
	m.batches[0] = b
	return b
}

// fact returns f decoded for the engine, decoding it only if no runtime
// did before.
func (m *factMemo) fact(b *decodedBatch, f *store.Fact) (projection.Fact, error) {
	if b == nil || f.Position < b.first || f.Position-b.first >= int64(len(b.facts)) {
		m.decodes.Add(1)
		return toProjectionFact(f)
	}
	d := &b.facts[f.Position-b.first]
	d.once.Do(func() {
		m.decodes.Add(1)
		d.id = f.ID
		d.f, d.err = toProjectionFact(f)
	})
	if d.id != f.ID {
		// Not the fact the memo was made for (a store that reused a
		// position): decode it for this caller alone.
		m.decodes.Add(1)
		return toProjectionFact(f)
	}
	return d.f, d.err
}
