package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/host/tracing"
)

// runtime is one config version at work: its engine, and the stream
// consumer that feeds the engine's cached state.
type runtime struct {
	s        *Service
	tenant   string
	configID string
	version  int64
	key      string
	engine   *projection.Engine
	source   string
	types    map[string]bool
	rollups  bool
	// materialized is false for a projection with materialize: false: it
	// has no state and no consumer and answers compute queries only.
	materialized bool

	pos    atomic.Int64 // global position of the last fact handled
	target atomic.Int64 // stream head when the runtime started; -1 unknown
	ready  atomic.Bool
	// readyAt is when ready became true (UnixNano).
	readyAt atomic.Int64

	// marked is set once the state key is marked (startPosition); the
	// mark is watched from then on. rebuild asks the next start position
	// to begin again from the first fact: the mark went missing while the
	// runtime ran.
	marked  atomic.Bool
	rebuild atomic.Bool
	// resume asks the next start position to read again the facts the
	// state lacks: watchMark saw the state go back in time (a Redis
	// restored from an older snapshot keeps the mark but not what came
	// after it).
	resume atomic.Bool

	// applied is the greatest fact id this runtime has handed the engine:
	// the state's factsThroughId never moves back, so a smaller one means
	// the state went back.
	appliedMu sync.Mutex
	applied   string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	// rejoin ends the current pass of run, which then joins the stream
	// again from its start position.
	rejoin context.CancelFunc
}

func (s *Service) newRuntime(c *compiled, key string) (*runtime, error) {
	settings := c.versioned.Settings
	rt := &runtime{
		s: s, tenant: c.cfg.TenantID, configID: c.cfg.ID, version: c.cfg.Version, key: key,
		source: settings.Source, types: map[string]bool{}, materialized: settings.Materialize,
		rollups: settings.Rollup != nil && settings.Rollup.Enabled,
	}
	for _, t := range settings.FactTypes {
		rt.types[t] = true
	}
	rt.target.Store(-1)
	e, err := projection.NewEngineFromVersioned(c.versioned, projection.EngineOptions{
		State:   s.opts.State,
		Source:  factSource{st: s.opts.Store, tenant: rt.tenant, entityType: rt.source, types: settings.FactTypes},
		Emitter: emitter{st: s.opts.Store, tenant: rt.tenant},
		Now:     s.opts.Clock.Now,
		Logger:  s.log,
	})
	if err != nil {
		return nil, err
	}
	rt.engine = e
	if !rt.materialized {
		rt.setReady()
	}
	return rt, nil
}

func (rt *runtime) consumerName() string { return "projection:" + rt.key }

func (rt *runtime) isReady() bool { return rt.ready.Load() }

func (rt *runtime) setReady() {
	rt.readyAt.Store(time.Now().UnixNano())
	rt.ready.Store(true)
}

// readyFor reports whether the runtime has been ready for at least d.
func (rt *runtime) readyFor(d time.Duration) bool {
	return rt.isReady() && time.Since(time.Unix(0, rt.readyAt.Load())) >= d
}

// inheritReady carries readiness over from the runtime this one replaces
// on the same cached state.
func (rt *runtime) inheritReady(old *runtime) {
	if old.isReady() {
		rt.setReady()
		rt.readyAt.Store(old.readyAt.Load())
	}
}

// start runs the stream consumer (and the rollup timer) until halt.
func (rt *runtime) start(parent context.Context) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.materialized || rt.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(parent)
	rt.cancel, rt.done = cancel, make(chan struct{})
	go func() {
		defer close(rt.done)
		var wg sync.WaitGroup
		if rt.rollups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rt.rollupLoop(ctx)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rt.watchMark(ctx)
		}()
		rt.run(ctx)
		wg.Wait()
	}()
}

// watchMark checks the state's mark every MarkInterval once the runtime
// has marked it. A missing mark means the cached state went with it (a
// Redis restarted empty or flushed under the running gateways): the
// runtime stops answering from that state (not ready: queries compute
// from the facts) and reads the stream again from the first fact. Every
// process that notices does so; the engine records fact ids, so facts
// applied twice count once.
func (rt *runtime) watchMark(ctx context.Context) {
	// Wall time, like the sync loop and the stream's polls: the service's
	// Clock is the projections' time (buckets, sealing), which tests move.
	t := time.NewTicker(rt.s.opts.MarkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !rt.marked.Load() || rt.rebuild.Load() {
			continue
		}
		marked, err := rt.s.opts.Marker.Marked(ctx, rt.key)
		if err != nil {
			// Unreachable state is not lost state: the consumer's own
			// errors and retries cover an outage.
			continue
		}
		if marked {
			if !rt.resume.Load() && rt.wentBack(ctx) {
				rt.s.log.Warn("projection: cached state went back in time (restored from an older snapshot?); reading again the facts it lacks", "state_key", rt.key)
				rt.resume.Store(true)
				rt.restart()
			}
			continue
		}
		rt.s.log.Warn("projection: cached state lost while running; rebuilding from the first fact", "state_key", rt.key)
		rt.rebuild.Store(true)
		rt.restart()
	}
}

// restart makes the runtime not ready and joins the stream again from
// its start position.
func (rt *runtime) restart() {
	rt.ready.Store(false)
	rt.target.Store(-1)
	rt.mu.Lock()
	if rt.rejoin != nil {
		rt.rejoin()
	}
	rt.mu.Unlock()
}

// wentBack reports whether the state's newest fact is older than one this
// runtime applied. An unreachable state is not known to have gone back.
func (rt *runtime) wentBack(ctx context.Context) bool {
	rt.appliedMu.Lock()
	applied := rt.applied
	rt.appliedMu.Unlock()
	if applied == "" {
		return false
	}
	through, err := rt.engine.FactsThroughID(ctx, rt.key)
	return err == nil && through < applied
}

// noteApplied records the greatest fact id of a batch the engine took.
func (rt *runtime) noteApplied(batch []projection.Fact) {
	rt.appliedMu.Lock()
	defer rt.appliedMu.Unlock()
	for i := range batch {
		rt.applied = max(rt.applied, batch[i].ID)
	}
}

// halt stops the runtime and waits for it; it can be called more than once.
func (rt *runtime) halt() {
	rt.mu.Lock()
	cancel, done := rt.cancel, rt.done
	rt.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// run feeds the engine from the stream until ctx ends: the runtime reads
// on its own until it has caught up, then the service's shared reader
// feeds it (see stream.Group).
func (rt *runtime) run(ctx context.Context) {
	st := rt.s.opts.Store
	c := &stream.Consumer{
		Name:  rt.consumerName(),
		Store: st,
		Handler: func(ctx context.Context, facts []store.Fact) error {
			_, err := rt.handle(ctx, facts)
			return err
		},
		BatchSize:    rt.s.opts.BatchSize,
		PollInterval: rt.s.opts.PollInterval,
		Logger:       rt.s.log.With("state_key", rt.key),
		Metrics:      rt.s.opts.Metrics,
		// Ready once the consumer reaches the head it sees now: from then
		// on the projection lags the stream only by what is in flight.
		From: func(ctx context.Context) (int64, error) {
			cp, err := rt.startPosition(ctx)
			if err != nil {
				return 0, err
			}
			head, err := st.HeadPosition(ctx)
			if err != nil {
				return 0, err
			}
			rt.pos.Store(cp)
			rt.target.Store(head)
			rt.checkReady()
			return cp, nil
		},
		Relevant: rt.relevant,
	}
	for {
		pass, cancel := context.WithCancel(ctx)
		rt.mu.Lock()
		rt.rejoin = cancel
		rt.mu.Unlock()
		err := rt.s.group.Join(pass, c)
		cancel()
		if err != nil {
			rt.s.log.Error("projection consumer stopped", "state_key", rt.key, "err", err)
			return
		}
		if ctx.Err() != nil || !(rt.rebuild.Load() || rt.resume.Load()) {
			return
		}
		// The mark went missing, or the state went back (watchMark): join
		// again from the start position.
	}
}

// startPosition returns the position the runtime reads on from: its
// checkpoint, or 0 when the cached state behind the checkpoint is gone (no
// mark and nothing stored), in which case the checkpoint is reset so that
// the stream consumer backfills from the first fact. The state key is
// marked before any state is written. Replays are harmless: the engine
// records fact ids.
func (rt *runtime) startPosition(ctx context.Context) (int64, error) {
	st, m := rt.s.opts.Store, rt.s.opts.Marker
	// What this pass applies is compared with the state from here on:
	// a state read again from an earlier position is behind what the
	// previous pass applied until it catches up.
	rt.appliedMu.Lock()
	rt.applied = ""
	rt.appliedMu.Unlock()
	if rt.rebuild.Load() {
		// The state was lost while the runtime ran (watchMark).
		if err := st.SetCheckpoint(ctx, rt.consumerName(), 0); err != nil {
			return 0, err
		}
		if err := m.Mark(ctx, rt.key); err != nil {
			return 0, err
		}
		rt.rebuild.Store(false)
		return 0, nil
	}
	cp, err := st.GetCheckpoint(ctx, rt.consumerName())
	if err != nil {
		return 0, err
	}
	marked, err := m.Marked(ctx, rt.key)
	if err != nil {
		return 0, err
	}
	if marked {
		rt.marked.Store(true)
		rt.resume.Store(false)
		return rt.resumePosition(ctx, cp)
	}
	if cp > 0 {
		v, err := rt.s.opts.State.StorageVersion(ctx, rt.key)
		if err != nil {
			return 0, fmt.Errorf("projection %s: read cached state: %w", rt.key, err)
		}
		if v == 0 {
			rt.s.log.Info("projection: cached state lost; rebuilding from the first fact", "state_key", rt.key, "checkpoint", cp)
			if err := st.SetCheckpoint(ctx, rt.consumerName(), 0); err != nil {
				return 0, err
			}
			cp = 0
		}
	}
	if err := m.Mark(ctx, rt.key); err != nil {
		return 0, err
	}
	rt.marked.Store(true)
	return cp, nil
}

// resumePosition returns where to read on from checkpoint cp: cp, unless
// the cached state lacks facts of the projection at or before cp (a Redis
// restored from an older snapshot keeps its mark but loses what came
// after it). Then it is the position of the newest fact the state holds:
// the runtime applies facts in position order, so everything before that
// position is held, and what it reads again and already holds counts
// once.
func (rt *runtime) resumePosition(ctx context.Context, cp int64) (int64, error) {
	if cp == 0 {
		return 0, nil
	}
	through, err := rt.engine.FactsThroughID(ctx, rt.key)
	if err != nil {
		return 0, fmt.Errorf("projection %s: read cached state: %w", rt.key, err)
	}
	// The pass's applies require the state to keep at least what it holds
	// now (see handle): one that goes back before the first of them lands
	// is noticed too.
	rt.appliedMu.Lock()
	rt.applied = through
	rt.appliedMu.Unlock()
	var from int64
	if through != "" {
		f, err := rt.s.opts.Store.GetFact(ctx, rt.tenant, through)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return 0, err
		default:
			from = f.Position
		}
	}
	if from >= cp {
		return cp, nil
	}
	lacks, err := rt.factsBetween(ctx, from, cp)
	if err != nil || !lacks {
		return cp, err
	}
	rt.s.log.Warn("projection: cached state lacks facts its checkpoint passed (restored from an older snapshot?); reading them again",
		"state_key", rt.key, "checkpoint", cp, "from", from)
	return from, nil
}

// factsBetween reports whether a fact the projection reads lies at a
// position in (from, to]. A page of the fact types' facts of other
// entity types counts as one: reading again is safe, only slower.
func (rt *runtime) factsBetween(ctx context.Context, from, to int64) (bool, error) {
	const page = 100
	for typ := range rt.types {
		facts, err := rt.s.opts.Store.ListFacts(ctx, store.FactFilter{TenantID: rt.tenant, Type: typ, AfterPosition: from, Limit: page})
		if err != nil {
			return false, err
		}
		for i := range facts {
			if facts[i].Position > to {
				break
			}
			if rt.relevant(&facts[i]) || i == page-1 {
				return true, nil
			}
		}
	}
	return false, nil
}

func (rt *runtime) checkReady() {
	if t := rt.target.Load(); t >= 0 && rt.pos.Load() >= t && !rt.isReady() {
		rt.setReady()
	}
}

// handle feeds the facts of the projection's tenant, source entity type
// and fact types to the engine and returns how many there were. A fact
// already recorded changes nothing, so a replayed batch is harmless.
func (rt *runtime) handle(ctx context.Context, facts []store.Fact) (int, error) {
	batch := make([]projection.Fact, 0, len(facts))
	var spans []func(error) // one per fact that continues a trace, when tracing is on
	var (
		shared *decodedBatch // made on the first relevant fact
		looked bool
	)
	for i := range facts {
		f := &facts[i]
		if !rt.relevant(f) {
			continue
		}
		if !looked {
			shared, looked = rt.s.decoded.batch(facts), true
		}
		pf, err := rt.s.decoded.fact(shared, f)
		if err != nil {
			// Stored data is always a JSON object; a fact the engine cannot
			// read is reported and left out rather than stopping the stream.
			rt.s.log.Error("projection: fact data unreadable; fact skipped", "state_key", rt.key, "fact_id", f.ID, "err", err)
			continue
		}
		batch = append(batch, pf)
		if rt.s.tracer != nil {
			spans = append(spans, tracing.FactSpans(ctx, rt.s.tracer, "projection.update", facts[i:i+1],
				attribute.String("factline.projection", rt.key)))
		}
	}
	if len(batch) > 0 {
		// The state must still hold what this runtime applied: once this
		// batch is in, its newest fact would hide a state that went back,
		// from every later check, in every process. The apply checks it
		// atomically with its writes: a check made before it could pass
		// just before a Redis restarted from an older snapshot took the
		// apply, held meanwhile in the client's retries.
		rt.appliedMu.Lock()
		atLeast := rt.applied
		rt.appliedMu.Unlock()
		_, err := rt.engine.ProcessIncrementalBatch(ctx, batch, &projection.ProcessOptions{ProjectionKey: rt.key, AtLeast: atLeast})
		for _, end := range spans {
			end(err)
		}
		if errors.Is(err, projection.ErrStateBehind) {
			rt.s.log.Warn("projection: cached state went back in time (restored from an older snapshot?); reading again the facts it lacks", "state_key", rt.key)
			rt.resume.Store(true)
			rt.restart()
			return 0, fmt.Errorf("projection %s: %w: %w", rt.key, err, context.Canceled)
		}
		if err != nil {
			return 0, fmt.Errorf("projection %s: %w", rt.key, err)
		}
		rt.noteApplied(batch)
	}
	rt.pos.Store(facts[len(facts)-1].Position)
	rt.checkReady()
	return len(batch), nil
}

func (rt *runtime) rollupLoop(ctx context.Context) {
	// On the service's clock: sealing depends on the clock, so a test
	// moves it past an hour instead of sleeping.
	for {
		tick, release := clock.After(rt.s.opts.Clock, rt.s.opts.RollupInterval)
		select {
		case <-ctx.Done():
			release()
			return
		case <-tick:
			if _, err := rt.engine.Rollup(ctx, rt.key, nil); err != nil && ctx.Err() == nil {
				rt.s.log.Warn("projection: rollup failed", "state_key", rt.key, "err", err)
			}
		}
	}
}

// relevant reports whether f is of the projection's tenant, source entity
// type and fact types.
func (rt *runtime) relevant(f *store.Fact) bool {
	return f.TenantID == rt.tenant && f.EntityType == rt.source && rt.types[f.Type]
}

func toProjectionFact(f *store.Fact) (projection.Fact, error) {
	data, err := projection.DecodeData(f.Data)
	if err != nil {
		return projection.Fact{}, err
	}
	return projection.Fact{ID: f.ID, Type: f.Type, Subtype: f.Subtype, Timestamp: f.Timestamp, Data: data}, nil
}

// factSource reads a projection's source facts from the store for compute
// and verify queries.
type factSource struct {
	st         store.Store
	tenant     string
	entityType string
	types      []string
}

func (fs factSource) Facts(ctx context.Context, from, to int64, fn func(projection.Fact) error) error {
	return fs.st.ScanFacts(ctx, store.FactScan{TenantID: fs.tenant, Types: fs.types, EntityType: fs.entityType, From: from, To: to},
		func(f *store.Fact) error {
			pf, err := toProjectionFact(f)
			if err != nil {
				return fmt.Errorf("fact %s: %w", f.ID, err)
			}
			return fn(pf)
		})
}

// jsonObject encodes a fact's data for the store.
func jsonObject(m map[string]any) (json.RawMessage, error) {
	if m == nil {
		return json.RawMessage(`{}`), nil
	}
	return json.Marshal(m)
}
