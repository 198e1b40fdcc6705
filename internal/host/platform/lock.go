package platform

import (
	"hash/maphash"
	"sync"
)

// stripedLock serialises work per key with a fixed set of mutexes: two keys
// may share a stripe (harmless, only slower), memory stays bounded.
type stripedLock struct {
	seed    maphash.Seed
	stripes []sync.Mutex
}

func newStripedLock(n int) *stripedLock {
	return &stripedLock{seed: maphash.MakeSeed(), stripes: make([]sync.Mutex, n)}
}

func (l *stripedLock) lock(tenant, key string) (unlock func()) {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(tenant)
	h.WriteByte(0)
	h.WriteString(key)
	m := &l.stripes[h.Sum64()%uint64(len(l.stripes))]
	m.Lock()
	return m.Unlock
}
