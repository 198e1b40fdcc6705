package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Result is a projection result. Without timeWindow and groupBy it is one
// flat object of result keys; otherwise it maps each bucket key (the time
// bucket, then the group values, joined by ':') to such an object. An
// aggregated query has one object under "aggregated". A result from an
// engine built from a versioned config has "_meta": {"config_version": n}.
//
// Values: count and <field>_distinct are int64; <field>_sum, _avg, _min
// and _max are json.Number (exact decimals; avg has at most 16 digits
// after the point); _avg, _min and _max are nil for a bucket with no
// numeric value of the field.
type Result map[string]any

// FactSource gives compute and verify modes the source facts: every fact
// with from <= timestamp <= to (milliseconds; 0 leaves that end open), in
// any order. Facts of other types may be included; the engine filters.
type FactSource interface {
	Facts(ctx context.Context, from, to int64, fn func(Fact) error) error
}

// SliceSource is a FactSource over facts held in memory.
type SliceSource []Fact

// Facts implements FactSource.
func (s SliceSource) Facts(ctx context.Context, from, to int64, fn func(Fact) error) error {
	for _, f := range s {
		if (from != 0 && f.Timestamp < from) || (to != 0 && f.Timestamp > to) {
			continue
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// EngineOptions are the defaults of an engine; per-call options override
// State and Source.
type EngineOptions struct {
	// State is the cached-state manager used when a call names none.
	State CachedState
	// Source feeds compute and verify queries.
	Source FactSource
	// Emitter receives the projection.migration_* facts.
	Emitter FactEmitter
	// Now is the clock of rollups and retention (default time.Now).
	Now func() time.Time
	// Logger reports failures to emit migration facts (default: discard).
	Logger *slog.Logger
}

// ProcessOptions direct processing to cached state.
type ProcessOptions struct {
	// State overrides the engine's cached state.
	State CachedState
	// ProjectionKey names the projection in the state.
	ProjectionKey string
	// FactsThroughID is stored with a materialized batch (Process); empty
	// means the greatest id of the batch. Ids compare as text.
	FactsThroughID string
	// AtLeast, when set, is the factsThroughId the caller knows the state
	// reached (the newest fact it applied): incremental processing then
	// applies the batch only if the stored factsThroughId is still at
	// least that, checked in the same atomic step as each write, and
	// fails with ErrStateBehind otherwise. A state restored from an older
	// snapshot would else take the batch, and its newest id would move
	// factsThroughId past the facts the state lost, hiding the loss.
	AtLeast string
}

// Engine processes facts for one configuration. It is safe for concurrent
// use.
type Engine struct {
	cfg     *Config
	s       *schema
	version int // config version; 0 when not built from a versioned config
	opts    EngineOptions

	formats    sync.Map // state id + key -> verified storage version
	nextRollup sync.Map // state id + key -> int64 ms
	// failedMigrations: state id + key -> *migrationRetry, while the
	// stored format serves after a failed migration.
	failedMigrations sync.Map
	faults           func(step int) error
}

// NewEngine returns an engine for a valid configuration (it is copied).
func NewEngine(cfg *Config, opts EngineOptions) (*Engine, error) {
	if cfg == nil {
		return nil, errors.New("projection: nil config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.Clone()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Engine{cfg: c, s: compile(c), opts: opts}, nil
}

// NewEngineFromVersioned returns an engine for the settings of a versioned
// config; its results carry _meta.config_version.
func NewEngineFromVersioned(vc *VersionedConfig, opts EngineOptions) (*Engine, error) {
	if vc == nil {
		return nil, errors.New("projection: nil versioned config")
	}
	if err := vc.Validate(); err != nil {
		return nil, err
	}
	e, err := NewEngine(vc.Settings, opts)
	if err != nil {
		return nil, err
	}
	e.version = vc.Version
	return e, nil
}

// Config returns a copy of the engine's configuration.
func (e *Engine) Config() *Config { return e.cfg.Clone() }

func (e *Engine) withMeta(r Result) Result {
	if e.version > 0 {
		r["_meta"] = map[string]any{"config_version": e.version}
	}
	return r
}

// Process aggregates facts and returns the result (see Result). Only facts
// whose type is in factTypes count; a fact id repeated in the batch counts
// once. When the configuration has materialize: true and opts name a
// cached state and projection key, the facts are also added to the
// cached state (each fact once, by id, as ProcessIncrementalBatch does)
// and factsThroughId is stored; callers pass only facts newer than the
// stored factsThroughId.
func (e *Engine) Process(facts []Fact, opts *ProcessOptions) (Result, error) {
	return e.ProcessContext(context.Background(), facts, opts)
}

// ProcessContext is Process with a context for the cached-state calls.
func (e *Engine) ProcessContext(ctx context.Context, facts []Fact, opts *ProcessOptions) (Result, error) {
	b := newBatchAgg(e.s, len(facts), minTime, maxTime+1)
	for i := range facts {
		b.add(&facts[i])
	}
	res := e.withMeta(b.render(false))
	st, key := e.target(opts)
	if !e.cfg.Materialize || st == nil || key == "" {
		return res, nil
	}
	through := ""
	if opts != nil {
		through = opts.FactsThroughID
	}
	if through == "" {
		through = maxID(facts)
	}
	if _, err := e.applyFacts(ctx, st, key, facts, through, ""); err != nil {
		return nil, err
	}
	return res, nil
}

func maxID(facts []Fact) string {
	m := ""
	for i := range facts {
		if facts[i].ID > m {
			m = facts[i].ID
		}
	}
	return m
}

func (e *Engine) target(opts *ProcessOptions) (CachedState, string) {
	st := e.opts.State
	key := ""
	if opts != nil {
		if opts.State != nil {
			st = opts.State
		}
		key = opts.ProjectionKey
	}
	return st, key
}

// ProcessIncremental adds one fact to the cached state: it records the
// fact id and updates the fact's bucket (and, with rollups, every sealed
// coarser bucket of its time) in one atomic step. A fact id already
// recorded has no effect; a late fact updates its historical buckets.
func (e *Engine) ProcessIncremental(ctx context.Context, f Fact, opts *ProcessOptions) error {
	_, err := e.ProcessIncrementalBatch(ctx, []Fact{f}, opts)
	return err
}

// ProcessIncrementalBatch is ProcessIncremental for many facts with few
// round trips; each fact is still applied atomically on its own. It
// returns how many facts were new (not recorded before and of a
// configured type).
func (e *Engine) ProcessIncrementalBatch(ctx context.Context, facts []Fact, opts *ProcessOptions) (int, error) {
	st, key := e.target(opts)
	if st == nil || key == "" {
		return 0, ErrNoState
	}
	if !e.cfg.Materialize {
		return 0, ErrNotMaterialized
	}
	return e.applyFacts(ctx, st, key, facts, maxID(facts), opts.AtLeast)
}

// deltas computes what each fact contributes, skipping facts of other
// types and unsupported times. Slices of all facts share backing arrays,
// and member strings are built once per bucket and group.
func (e *Engine) deltas(facts []Fact) []*factDelta {
	s := e.s
	L := len(s.levels)
	caches := make([]bucketCache, L)
	memberCache := make([]map[string]string, L) // group -> member of the cached bucket
	for j, w := range s.levels {
		caches[j].w = w
		memberCache[j] = map[string]string{}
	}
	hasGroups := len(s.groups) > 0
	slab := make([]factDelta, len(facts))
	members := make([]string, len(facts)*L)
	scores := make([]int64, len(facts)*L)
	vals := make([]fieldVal, len(facts)*len(s.fields))
	out := make([]*factDelta, 0, len(facts))
	for i := range facts {
		f := &facts[i]
		if !s.wants(f.Type) || !timeInRange(f.Timestamp) {
			continue
		}
		d := &slab[len(out)]
		n := len(out)
		d.id, d.ts = f.ID, f.Timestamp
		d.members = members[n*L : (n+1)*L : (n+1)*L]
		d.scores = scores[n*L : (n+1)*L : (n+1)*L]
		g := s.groupKey(f)
		for j, w := range s.levels {
			if w == windowAll {
				d.members[j] = g
				continue
			}
			prev := caches[j].start
			start, k := caches[j].lookup(f.Timestamp)
			d.scores[j] = start
			if !hasGroups {
				d.members[j] = k
				continue
			}
			if start != prev {
				clear(memberCache[j])
			}
			m, ok := memberCache[j][g]
			if !ok {
				m = k + ":" + g
				memberCache[j][g] = m
			}
			d.members[j] = m
		}
		nf := len(s.fields)
		d.vals = s.values(f, vals[n*nf:n*nf:(n+1)*nf])
		out = append(out, d)
	}
	return out
}

func (e *Engine) cacheKey(st CachedState, key string) string { return st.id() + "\x00" + key }

// applyFacts applies facts to a state, migrating first when the stored
// format differs, waiting out other processes' migrations, and running
// due rollups afterwards.
func (e *Engine) applyFacts(ctx context.Context, st CachedState, key string, facts []Fact, through, atLeast string) (int, error) {
	var applied int
	// Bounded chunks keep memory flat on large backfills. factsThroughId
	// moves only with the last chunk, once every fact before it is in.
	for i := 0; i < len(facts) || i == 0; i += applyChunk {
		chunk := facts[i:min(i+applyChunk, len(facts))]
		last := i+applyChunk >= len(facts)
		th := ""
		if last {
			th = through
		}
		deltas := e.deltas(chunk)
		err := e.withFormat(ctx, st, key, func(version int) error {
			// A retry re-sends every fact; those already applied are
			// deduplicated, so the counts add up.
			n, err := st.apply(ctx, key, e.s, version, deltas, th, atLeast)
			applied += n
			return err
		})
		if err != nil {
			return applied, err
		}
	}
	if e.cfg.rollupEnabled() {
		if err := e.autoRollup(ctx, st, key); err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// applyChunk is how many facts applyFacts prepares at a time.
const applyChunk = 16384

// withFormat runs fn with the storage version the state holds for key,
// after migrating it to the configured version if needed. It retries when
// fn finds the format changed or the state locked.
func (e *Engine) withFormat(ctx context.Context, st CachedState, key string, fn func(version int) error) error {
	ck := e.cacheKey(st, key)
	backoff := 2 * time.Millisecond
	mismatches := 0
	for {
		version, err := e.ensureFormat(ctx, st, key, ck)
		if err == nil {
			err = fn(version)
		}
		var ev *errVersion
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ev):
			e.formats.Delete(ck)
			mismatches++
			if mismatches > 5 {
				return fmt.Errorf("projection: storage version of %q keeps changing (another engine with a different storageVersion?): %w", key, err)
			}
		case errors.Is(err, errBusy):
			e.formats.Delete(ck)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
			case <-t.C:
			}
			backoff = min(backoff*2, 200*time.Millisecond)
		default:
			return err
		}
	}
}

// ensureFormat returns the storage version to use for key, migrating the
// stored state to the configured version when it differs.
func (e *Engine) ensureFormat(ctx context.Context, st CachedState, key, ck string) (int, error) {
	want := e.cfg.storageVersion()
	if v, ok := e.formats.Load(ck); ok {
		return v.(int), nil
	}
	m, err := st.meta(ctx, key, e.s)
	if err != nil {
		return 0, err
	}
	if err := checkFingerprint(e.s, m.fingerprint); err != nil {
		return 0, err
	}
	if m.version == 0 || m.version == want {
		// Nothing to migrate (any more: another engine may have).
		e.failedMigrations.Delete(ck)
	} else {
		now := e.opts.Now()
		var failed *migrationRetry
		if v, ok := e.failedMigrations.Load(ck); ok {
			failed = v.(*migrationRetry)
			// The original serves while the wait runs, and while one
			// caller tries again (readers read it; writers wait for the
			// migration's lock, as they do for any migration).
			if now.Before(failed.at) || !failed.trying.CompareAndSwap(false, true) {
				return m.version, nil
			}
		}
		if err := e.migrate(ctx, st, key, m.version, want); err != nil {
			if !errors.Is(err, ErrMigration) || ctx.Err() != nil {
				// Not the migration's failure: the caller gave up.
				if failed != nil {
					failed.trying.Store(false)
				}
				return 0, err
			}
			// The original format is intact and stays active: it serves
			// reads and writes until the migration is tried again, after
			// a wait that doubles with each failure.
			wait := migrationRetryFirst
			if failed != nil {
				wait = min(2*failed.wait, migrationRetryMax)
			}
			e.failedMigrations.Store(ck, &migrationRetry{at: now.Add(wait), wait: wait, err: err})
			e.opts.Logger.Warn("projection: storage migration failed; the stored format serves until it is tried again",
				"projection_key", key, "stored_version", m.version, "retry_in", wait, "err", err)
			return m.version, nil
		}
		e.failedMigrations.Delete(ck)
	}
	e.formats.Store(ck, want)
	return want, nil
}

// Waits before a failed storage migration is tried again.
const (
	migrationRetryFirst = 30 * time.Second
	migrationRetryMax   = 30 * time.Minute
)

// migrationRetry is when a failed migration is tried again, and the wait
// that led there.
type migrationRetry struct {
	at     time.Time
	wait   time.Duration
	err    error
	trying atomic.Bool // one caller tries again; the others use the original
}

func (e *Engine) autoRollup(ctx context.Context, st CachedState, key string) error {
	ck := e.cacheKey(st, key)
	now := e.opts.Now().UnixMilli()
	if v, ok := e.nextRollup.Load(ck); ok && now < v.(int64) {
		return nil
	}
	if _, err := e.rollup(ctx, st, key); err != nil {
		return err
	}
	p := e.s.levels[1]
	e.nextRollup.Store(ck, p.next(p.start(clampTime(now))))
	return nil
}

// RollupReport says what a rollup did.
type RollupReport struct {
	// Sealed counts coarser buckets written from their children.
	Sealed int
	// Deleted counts buckets removed by retention.
	Deleted int
}

// Rollup seals coarser windows whose trigger has passed on the engine's
// clock (an hour once it has ended, a day at the day boundary, a month at
// the month boundary), then deletes finer buckets past their retention.
// Incremental processing runs it when the clock crosses a boundary; call it
// on a timer to roll up a projection that receives no facts.
func (e *Engine) Rollup(ctx context.Context, projectionKey string, st CachedState) (RollupReport, error) {
	if st == nil {
		st = e.opts.State
	}
	if st == nil || projectionKey == "" {
		return RollupReport{}, ErrNoState
	}
	if !e.cfg.rollupEnabled() {
		return RollupReport{}, nil
	}
	return e.rollup(ctx, st, projectionKey)
}

func (e *Engine) rollup(ctx context.Context, st CachedState, key string) (RollupReport, error) {
	var rep RollupReport
	err := e.withFormat(ctx, st, key, func(version int) error {
		r, err := st.rollup(ctx, key, e.s, version, e.opts.Now().UnixMilli())
		rep = RollupReport(r)
		return err
	})
	return rep, err
}
