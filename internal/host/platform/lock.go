package platform

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// stripedLock serialises work per key with a fixed set of mutexes: two keys
// may share a stripe (harmless, only slower), memory stays bounded.
type stripedLock struct {
	seed    maphash.Seed
	stripes []stripe
}

// stripe is one mutex of a stripedLock and the count of writes made under
// it. A writer that read an entity before taking the stripe compares the
// count with the one it saw before reading: unchanged, no writer of this
// process wrote the entity in between, so the copy needs no second read.
// Writers in other processes are still caught by the version pin.
type stripe struct {
	sync.Mutex
	writes atomic.Uint64
}

func newStripedLock(n int) *stripedLock {
	return &stripedLock{seed: maphash.MakeSeed(), stripes: make([]stripe, n)}
}

func (l *stripedLock) stripe(tenant, key string) *stripe {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(tenant)
	h.WriteByte(0)
	h.WriteString(key)
	return &l.stripes[h.Sum64()%uint64(len(l.stripes))]
}

func (l *stripedLock) lock(tenant, key string) (unlock func()) {
	st := l.stripe(tenant, key)
	st.Lock()
	return st.Unlock
}

// wrote records a write under the stripe; call it, holding the stripe,
// once the write has returned (whatever its outcome: a failed write may
// still have committed).
func (st *stripe) wrote() { st.writes.Add(1) }

// readMark is the write count of an entity's stripe taken before the entity
// was read. The zero mark is never current.
type readMark struct {
	st *stripe
	n  uint64
}

func (l *stripedLock) mark(tenant, key string) readMark {
	st := l.stripe(tenant, key)
	return readMark{st: st, n: st.writes.Load()}
}

// current reports whether no write was made under the stripe since the
// mark was taken.
func (m readMark) current() bool { return m.st != nil && m.st.writes.Load() == m.n }
