// Package entitycache keeps recently read entities in memory so that
// repeated reads of one entity do not each cost a database round trip.
//
// A Cache is only correct while something tells it about every change: it
// is an [store.EntityWatcher], fed by the store's [store.EntityFeed] with
// the changes committed by every process sharing the database, and the
// process's own writers call [Cache.Invalidate] after each write, so a
// process reads its own writes at once. While the feed is down (and until
// it first comes up) the cache serves nothing and every read goes to the
// database.
//
// Consistency: a read may return an entity up to the time a change takes
// to be announced after its commit (on Postgres a notification; on SQLite
// up to the feed's 50 ms poll), and
// never one older than MaxAge. A read that loads an entity
// while a change of it is reported does not cache what it loaded.
package entitycache

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// Defaults of Options.
const (
	DefaultMaxEntries = 100_000
	DefaultMaxBytes   = 64 << 20
	DefaultMaxAge     = 5 * time.Second
)

// shardCount is the number of independently locked parts of a Cache.
const shardCount = 64

// Options bound a Cache. The zero value is valid.
type Options struct {
	// MaxEntries bounds the number of cached entities (default 100,000).
	MaxEntries int
	// MaxBytes bounds the size of the cached entities' JSON and ids
	// (default 64 MiB); an entity larger than a shard's share of it is not
	// cached.
	MaxBytes int
	// MaxAge is how long an entity may be served after it was read
	// (default 5 s): the bound on staleness should a change go unreported.
	MaxAge time.Duration
	// Now is the clock; nil means time.Now. Tests inject one.
	Now func() time.Time
}

// Cache is an entity read cache. It is safe for concurrent use.
type Cache struct {
	maxEntries int // per shard
	maxBytes   int // per shard
	maxAge     time.Duration
	now        func() time.Time
	seed       maphash.Seed

	// live is set while the feed announces changes.
	live atomic.Bool
	// epoch moves on with every Resync, so loads that started before
	// one do not fill the cache after it.
	epoch atomic.Uint64

	hits, misses atomic.Int64
	entries      atomic.Int64

	shards [shardCount]shard
}

type key struct{ tenant, id string }

type entry struct {
	e       *store.Entity
	size    int
	expires int64  // UnixNano
	seq     uint64 // when it was added, in the shard's order
}

// queued is an entry in a shard's order of insertion; it is stale once the
// key's entry (if any) has another seq.
type queued struct {
	k   key
	seq uint64
}

type shard struct {
	mu sync.Mutex
	// gen moves on with every invalidation of a key of the shard, so a
	// load that started before one does not fill the cache after it.
	gen   uint64
	m     map[key]entry
	bytes int
	// order lists the entries as they were added, oldest at head: every
	// entry lives MaxAge, so the oldest is the first to expire, and
	// eviction takes it without looking at the others. Entries removed
	// otherwise leave stale items, skipped and compacted away.
	order []queued
	head  int
	seq   uint64
	_     [32]byte // keep shards on separate cache lines
}

var _ store.EntityWatcher = (*Cache)(nil)

// New returns an empty cache, not live: it serves nothing until its first
// Resync(true).
func New(opts Options) *Cache {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Cache{
		maxEntries: max(1, opts.MaxEntries/shardCount),
		maxBytes:   max(1, opts.MaxBytes/shardCount),
		maxAge:     opts.MaxAge,
		now:        opts.Now,
		seed:       maphash.MakeSeed(),
	}
	for i := range c.shards {
		c.shards[i].m = make(map[key]entry)
	}
	return c
}

func (c *Cache) shardOf(tenant, id string) *shard {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(tenant)
	h.WriteByte(0)
	h.WriteString(id)
	return &c.shards[h.Sum64()%shardCount]
}

// Get returns the entity tenant/id: the cached copy when there is a fresh
// one, else what load returns, which is cached when it is an entity and no
// change of it (nor a Resync) was reported while it loaded. Errors are not
// cached.
//
// The entity returned is the caller's, but its byte slices and slot
// pointers are shared with the cache: do not modify what they point to.
func (c *Cache) Get(ctx context.Context, tenant, id string, load func(context.Context) (*store.Entity, error)) (*store.Entity, error) {
	s := c.shardOf(tenant, id)
	live := c.live.Load()
	now := c.now()
	s.mu.Lock()
	if live {
		if en, ok := s.m[key{tenant, id}]; ok {
			if now.UnixNano() < en.expires {
				s.mu.Unlock()
				c.hits.Add(1)
				cp := *en.e
				return &cp, nil
			}
			c.remove(s, key{tenant, id}, en)
		}
	}
	gen, epoch := s.gen, c.epoch.Load()
	s.mu.Unlock()
	c.misses.Add(1)

	e, err := load(ctx)
	if err != nil || e == nil || !live {
		return e, err
	}
	size := entrySize(e)
	if size > c.maxBytes {
		return e, nil
	}
	cp := *e
	s.mu.Lock()
	defer s.mu.Unlock()
	// A change reported since the load began may be newer than what it
	// read; so may anything before a Resync.
	if s.gen != gen || c.epoch.Load() != epoch || !c.live.Load() {
		return e, nil
	}
	k := key{tenant, id}
	if old, ok := s.m[k]; ok {
		c.remove(s, k, old)
	} else {
		// The caller's strings may alias memory it reuses.
		k = key{string([]byte(tenant)), string([]byte(id))}
	}
	c.makeRoom(s, size)
	s.seq++
	s.m[k] = entry{e: &cp, size: size, expires: now.Add(c.maxAge).UnixNano(), seq: s.seq}
	s.order = append(s.order, queued{k, s.seq})
	s.bytes += size
	c.entries.Add(1)
	return e, nil
}

// Invalidate forgets tenant/id. Writers call it after every write to the
// entity, whatever its outcome (a write that failed may still have
// committed).
func (c *Cache) Invalidate(tenant, id string) {
	s := c.shardOf(tenant, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	k := key{tenant, id}
	if en, ok := s.m[k]; ok {
		c.remove(s, k, en)
	}
}

// EntityChanged implements store.EntityWatcher.
func (c *Cache) EntityChanged(tenantID, id string) { c.Invalidate(tenantID, id) }

// Resync implements store.EntityWatcher: it forgets every entity, and
// serves again only when live.
func (c *Cache) Resync(live bool) {
	c.live.Store(false)
	c.epoch.Add(1)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.gen++
		c.entries.Add(-int64(len(s.m)))
		clear(s.m)
		s.order, s.head = nil, 0
		s.bytes = 0
		s.mu.Unlock()
	}
	c.live.Store(live)
}

// Live reports whether the cache serves entities (its feed is up).
func (c *Cache) Live() bool { return c.live.Load() }

// Empty implements store.EntityWatcher: whether no entity is cached.
func (c *Cache) Empty() bool { return c.entries.Load() == 0 }

// Stats are a cache's counters.
type Stats struct {
	Hits, Misses int64 // Get calls served from memory and by load
	Entries      int
	Bytes        int
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	st := Stats{Hits: c.hits.Load(), Misses: c.misses.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Entries += len(s.m)
		st.Bytes += s.bytes
		s.mu.Unlock()
	}
	return st
}

// remove deletes k, whose entry in s is en; s.mu is held.
func (c *Cache) remove(s *shard, k key, en entry) {
	delete(s.m, k)
	s.bytes -= en.size
	c.entries.Add(-1)
}

// makeRoom evicts the oldest entries of s until one of size fits, expired
// ones first since they are the oldest; s.mu is held.
func (c *Cache) makeRoom(s *shard, size int) {
	for (len(s.m) >= c.maxEntries || s.bytes+size > c.maxBytes) && s.head < len(s.order) {
		q := s.order[s.head]
		s.order[s.head] = queued{}
		s.head++
		if en, ok := s.m[q.k]; ok && en.seq == q.seq {
			c.remove(s, q.k, en)
		}
	}
	// Keep the order at most about twice the entries: drop what was
	// taken from the front, and the stale items left by invalidations.
	if live := len(s.order) - s.head; s.head > 64 && s.head >= live {
		s.order = append(s.order[:0], s.order[s.head:]...)
		clear(s.order[len(s.order):cap(s.order)])
		s.head = 0
	} else if live > 2*len(s.m)+64 {
		kept := s.order[:0]
		for _, q := range s.order[s.head:] {
			if en, ok := s.m[q.k]; ok && en.seq == q.seq {
				kept = append(kept, q)
			}
		}
		clear(s.order[len(kept):])
		s.order, s.head = kept, 0
	}
}

// entrySize approximates the memory an entity holds.
func entrySize(e *store.Entity) int {
	n := 256 + len(e.TenantID) + len(e.ID) + len(e.Type) + len(e.Data) + len(e.Metadata) + len(e.State)
	for _, p := range e.Slots.S {
		if p != nil {
			n += len(*p) + 16
		}
	}
	return n
}
