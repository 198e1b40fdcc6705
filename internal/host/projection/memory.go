package projection

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// MemoryState is the in-process cached state, the embedded default when no
// Redis is configured. It is safe for concurrent use; every operation on a
// projection is atomic. Its contents live as long as the process.
//
// It keeps the same logical layout as the Redis state: in format 1 a
// projection is one entry under <prefix><projectionKey>; in format 2 each
// bucket is an entry under <prefix><projectionKey>:<window>:<bucket key>
// (see Keys). Migrations between the formats copy the state, switch
// atomically and keep the original on failure, as in Redis.
type MemoryState struct {
	prefix string
	root   *memRoot
}

var _ CachedState = (*MemoryState)(nil)

type memRoot struct {
	id string
	// mu is held for reading by reads (queries, metadata), which only
	// read the model, so queries of any projections run side by side; a
	// write holds it alone.
	mu    sync.RWMutex
	projs map[string]*memProj
}

type memProj struct {
	version     int
	fingerprint string
	m           *model
	windows     []Window
	seen        map[string]struct{}
	migrating   bool
}

var memIDs atomic.Int64

// NewMemoryState returns an empty in-process state.
func NewMemoryState() *MemoryState {
	return &MemoryState{root: &memRoot{id: fmt.Sprintf("mem%d", memIDs.Add(1)), projs: map[string]*memProj{}}}
}

// WithPrefix returns a view of the same state whose keys all start with
// the prefix (added to the current one).
func (m *MemoryState) WithPrefix(prefix string) *MemoryState {
	return &MemoryState{prefix: m.prefix + prefix, root: m.root}
}

func (m *MemoryState) id() string { return m.root.id + "\x00" + m.prefix }

func (m *MemoryState) get(key string) *memProj { return m.root.projs[m.prefix+key] }

// StorageVersion implements CachedState.
func (m *MemoryState) StorageVersion(_ context.Context, key string) (int, error) {
	m.root.mu.RLock()
	defer m.root.mu.RUnlock()
	if p := m.get(key); p != nil {
		return p.version, nil
	}
	return 0, nil
}

// Keys implements CachedState.
func (m *MemoryState) Keys(_ context.Context, key string) ([]string, error) {
	m.root.mu.RLock()
	defer m.root.mu.RUnlock()
	p := m.get(key)
	if p == nil {
		return nil, nil
	}
	if p.version == 1 {
		return []string{m.prefix + key}, nil
	}
	var out []string
	for j, l := range p.m.levels {
		for mem := range l.m {
			out = append(out, sparseKey(m.prefix+key, p.windows[j], mem))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Delete implements CachedState.
func (m *MemoryState) Delete(_ context.Context, key string) error {
	m.root.mu.Lock()
	defer m.root.mu.Unlock()
	delete(m.root.projs, m.prefix+key)
	return nil
}

func (m *MemoryState) meta(_ context.Context, key string, s *schema) (stateMeta, error) {
	m.root.mu.RLock()
	defer m.root.mu.RUnlock()
	p := m.get(key)
	if p == nil {
		return emptyMeta(s), nil
	}
	return p.metaLocked(s), nil
}

func (p *memProj) metaLocked(s *schema) stateMeta {
	meta := stateMeta{version: p.version, fingerprint: p.fingerprint, through: p.m.through}
	meta.wm = append([]int64(nil), p.m.wm...)
	meta.del = append([]int64(nil), p.m.del...)
	if len(meta.wm) != len(s.levels) {
		e := emptyMeta(s)
		meta.wm, meta.del = e.wm, e.del
	}
	return meta
}

// open returns the projection for a write, creating it, after the checks
// every write makes.
func (m *MemoryState) open(key string, s *schema, version int) (*memProj, error) {
	p := m.get(key)
	if p == nil {
		p = &memProj{version: version, fingerprint: s.fingerprint, m: newModel(s), windows: s.levels, seen: map[string]struct{}{}}
		m.root.projs[m.prefix+key] = p
	}
	if p.migrating {
		return nil, errBusy
	}
	if p.version != version {
		return nil, &errVersion{stored: p.version}
	}
	if err := checkFingerprint(s, p.fingerprint); err != nil {
		return nil, err
	}
	return p, nil
}

func (m *MemoryState) apply(_ context.Context, key string, s *schema, version int, deltas []*factDelta, maxID, atLeast string) (int, error) {
	m.root.mu.Lock()
	defer m.root.mu.Unlock()
	p, err := m.open(key, s, version)
	if err != nil {
		return 0, err
	}
	if atLeast != "" && p.m.through < atLeast {
		return 0, ErrStateBehind
	}
	n := 0
	for _, d := range deltas {
		if _, dup := p.seen[d.id]; dup {
			continue
		}
		p.seen[d.id] = struct{}{}
		p.m.apply(s, d)
		n++
	}
	if maxID > p.m.through {
		p.m.through = maxID
	}
	return n, nil
}

func (m *MemoryState) rollup(_ context.Context, key string, s *schema, version int, now int64) (rollupStats, error) {
	m.root.mu.Lock()
	defer m.root.mu.Unlock()
	if m.get(key) == nil {
		return rollupStats{}, nil
	}
	p, err := m.open(key, s, version)
	if err != nil {
		return rollupStats{}, err
	}
	return p.m.rollup(s, now), nil
}

func (m *MemoryState) load(_ context.Context, key string, s *schema, version int, plan func(stateMeta) []planRange, aggregate bool, f *groupFilter) (*loaded, stateMeta, error) {
	m.root.mu.RLock()
	defer m.root.mu.RUnlock()
	p := m.get(key)
	if p == nil {
		meta := emptyMeta(s)
		plan(meta)
		return &loaded{}, meta, nil
	}
	// During a migration readers see the original until the switch.
	if !p.migrating && p.version != version {
		return nil, stateMeta{}, &errVersion{stored: p.version}
	}
	if err := checkFingerprint(s, p.fingerprint); err != nil {
		return nil, stateMeta{}, err
	}
	meta := p.metaLocked(s)
	ld := p.m.load(s, plan(meta), aggregate, f)
	// Cells leave the lock to be rendered: copy what renders.
	for i := range ld.buckets {
		ld.buckets[i].c = ld.buckets[i].c.snapshot()
	}
	return ld, meta, nil
}

// memMigrateChunk is how many buckets a memory migration copies per step.
const memMigrateChunk = 256

func (m *MemoryState) migrate(ctx context.Context, key string, s *schema, from, to int, hooks migrateHooks) (int, error) {
	m.root.mu.Lock()
	p := m.get(key)
	switch {
	case p == nil || p.version != from:
		m.root.mu.Unlock()
		return 0, errNoMigration
	case p.migrating:
		m.root.mu.Unlock()
		return 0, errBusy
	}
	if err := checkFingerprint(s, p.fingerprint); err != nil {
		m.root.mu.Unlock()
		return 0, err
	}
	p.migrating = true
	orig := p.m
	m.root.mu.Unlock()
	if hooks.started != nil {
		hooks.started()
	}

	// Writers are held off (errBusy) while the copy is made outside the
	// lock, bucket by bucket, so readers keep reading the original.
	copied, err := copyModel(ctx, s, orig, hooks.step)

	m.root.mu.Lock()
	defer m.root.mu.Unlock()
	p.migrating = false
	if err != nil {
		return 0, err
	}
	p.m = copied
	p.version = to
	return copied.bucketCount(), nil
}

// copyModel copies a model in steps of memMigrateChunk buckets, calling
// step between them.
func copyModel(ctx context.Context, s *schema, orig *model, step func(int) error) (*model, error) {
	c := newModel(s)
	copy(c.wm, orig.wm)
	copy(c.del, orig.del)
	c.through = orig.through
	n, steps := 0, 0
	for j, l := range orig.levels {
		mems := make([]string, 0, len(l.m))
		for mem := range l.m {
			mems = append(mems, mem)
		}
		sort.Strings(mems)
		for _, mem := range mems {
			e := l.m[mem]
			ne := c.levels[j].get(s, mem, e.score)
			ne.c = e.c.clone()
			n++
			if n%memMigrateChunk == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if step != nil {
					if err := step(steps); err != nil {
						return nil, err
					}
				}
				steps++
			}
		}
	}
	if step != nil {
		if err := step(steps); err != nil {
			return nil, err
		}
	}
	return c, nil
}
