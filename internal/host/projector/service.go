package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/host/tracing"
	"github.com/factline/factline/internal/lifecycle"
)

// Options configure a Service.
type Options struct {
	Store store.Store
	// State holds materialized projections: Redis (projection.RedisState)
	// or in process (projection.MemoryState).
	State projection.CachedState
	// Marker records which cached states were built from the first fact,
	// so that state lost behind a checkpoint is rebuilt (see Marker). It
	// must live where State does: a RedisMarker on State's Redis. Default:
	// in process, right for in-process state.
	Marker Marker
	// EntityTypes lists the declared entity types, sorted; a projection's
	// source must be one of them. Nil accepts any source.
	EntityTypes func() []string
	// FactTypes lists the fact types an entity type declares; each of a
	// projection's factTypes must be one its source declares. Nil accepts
	// any.
	FactTypes func(entityType string) []string
	// SyncInterval is how often the active projection configs are re-read
	// (default 1 s). Queries also look a config up on a miss, so a new
	// projection answers at once.
	SyncInterval time.Duration
	// RollupInterval is how often projections with rollups seal finished
	// buckets when no facts arrive (default 30 s).
	RollupInterval time.Duration
	// SweepInterval spaces the searches for cached state and checkpoints
	// left over by a process that stopped mid-way (default 1 min).
	SweepInterval time.Duration
	// RetireGrace is how long the cached state of a superseded version is
	// kept after its successor caught up (default 1 min), so that other
	// processes sharing it, which may catch up a moment later, can still
	// read it.
	RetireGrace time.Duration
	// PollInterval is the stream consumers' fallback wake-up (default 2 s).
	PollInterval time.Duration
	// StateTimeout bounds a materialized query's read of the cached state
	// (default 5 s); past it the query answers 503.
	StateTimeout time.Duration
	// MarkInterval is how often a running projection checks that its
	// cached state's mark is still there (default 2 s): a Redis that
	// restarted empty, or was flushed, while the gateways ran loses the
	// state and the mark together, and the projection rebuilds from the
	// first fact instead of answering from what it holds since.
	MarkInterval time.Duration
	// BatchSize bounds the facts of one stream batch (default 512).
	BatchSize int
	Logger    *slog.Logger
	Metrics   *stream.Metrics
	// Clock is the engines' clock (bucket times, rollup sealing) and runs
	// the rollup timer; default clock.Real.
	Clock clock.Clock
	// TracerProvider traces projection updates; nil or the no-op
	// provider: off.
	TracerProvider trace.TracerProvider
}

// Service runs every tenant's projections. Create it with New, register its
// config check with RegisterConfigType, then Start; Stop ends it.
type Service struct {
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer // nil when tracing is off

	// group reads the stream once for every runtime that has caught up.
	group *stream.Group
	// decoded shares the facts of a batch, decoded once, among runtimes.
	decoded factMemo

	mu        sync.Mutex
	tracked   map[ref]*tracked
	bad       map[string]bool // config versions that failed to compile, logged once
	lastSweep time.Time
	// doomed are halted runtimes whose state is deleted at the time given.
	doomed map[*runtime]time.Time
	ctx    context.Context // the context runtimes run under; nil before Start

	// bg runs the shared reader and the config sync loop.
	bg lifecycle.Base
}

// ref names one projection config.
type ref struct{ tenant, id string }

// tracked is what runs for one projection config: the runtime of its
// current version and, while that one backfills, the runtime of an older
// version with different state, which answers queries meanwhile.
type tracked struct {
	since    time.Time // when it began to be tracked
	name     string
	current  *runtime
	previous *runtime
}

// New checks the options and applies defaults.
func New(opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("projector: a store is required")
	}
	if opts.State == nil {
		return nil, errors.New("projector: a cached state is required")
	}
	if opts.Marker == nil {
		opts.Marker = NewMemoryMarker()
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = time.Second
	}
	if opts.RollupInterval <= 0 {
		opts.RollupInterval = 30 * time.Second
	}
	if opts.RetireGrace <= 0 {
		opts.RetireGrace = time.Minute
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = time.Minute
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 512
	}
	if opts.StateTimeout <= 0 {
		opts.StateTimeout = 5 * time.Second
	}
	if opts.MarkInterval <= 0 {
		opts.MarkInterval = 2 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 2 * time.Second
	}
	opts.Clock = clock.Or(opts.Clock)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: opts, log: log, tracer: tracing.Tracer(opts.TracerProvider), tracked: map[ref]*tracked{}, bad: map[string]bool{}, doomed: map[*runtime]time.Time{}}
	s.group = &stream.Group{Store: opts.Store, BatchSize: opts.BatchSize, PollInterval: opts.PollInterval, Logger: log}
	return s, nil
}

// Start loads the active projection configs, starts their runtimes and
// keeps them in step with the configs until Stop.
func (s *Service) Start(ctx context.Context) error {
	err := s.bg.Start(context.WithoutCancel(ctx), func(ctx context.Context) {
		if err := s.group.Run(ctx); err != nil {
			s.log.Error("projection: shared stream reader stopped", "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("projector: %w", err)
	}
	s.mu.Lock()
	s.ctx = s.bg.Context()
	s.mu.Unlock()
	if err := s.Sync(ctx); err != nil {
		s.log.Warn("projection: first config sync failed; retrying", "err", err)
	}
	s.bg.Go(s.loop)
	return nil
}

// Stop ends every runtime and waits for them, within ctx.
func (s *Service) Stop(ctx context.Context) error {
	err := s.bg.Stop(ctx)
	s.mu.Lock()
	var rts []*runtime
	for rt := range s.doomed {
		rts = append(rts, rt)
	}
	for _, t := range s.tracked {
		for _, rt := range []*runtime{t.current, t.previous} {
			if rt != nil {
				rts = append(rts, rt)
			}
		}
	}
	s.mu.Unlock()
	for _, rt := range rts {
		rt.halt()
	}
	return err
}

func (s *Service) loop(ctx context.Context) {
	t := time.NewTicker(s.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("projection: config sync failed", "err", err)
			}
		}
	}
}

// Sync reads the active projection configs and brings the runtimes in
// line: new configs and versions start (and backfill), archived ones stop
// and their cached state is deleted, and an old version whose successor
// has caught up is retired.
func (s *Service) Sync(ctx context.Context) error {
	listed := time.Now()
	cfgs, err := s.opts.Store.ListActiveConfigsByType(ctx, ConfigType)
	if err != nil {
		return err
	}
	live := make(map[ref]bool, len(cfgs))
	for i := range cfgs {
		c := &cfgs[i]
		live[ref{c.TenantID, c.ID}] = true
		s.apply(ctx, c)
	}
	s.mu.Lock()
	var retire []*runtime
	for r, t := range s.tracked {
		if !live[r] {
			if t.since.After(listed) {
				continue // started by a query for a config newer than the list
			}
			retire = append(retire, t.current, t.previous)
			delete(s.tracked, r)
			continue
		}
		if t.previous != nil && t.current.isReady() {
			s.doomLocked(t.previous)
			t.previous = nil
		}
	}
	now := time.Now()
	for rt, at := range s.doomed {
		if !now.Before(at) {
			retire = append(retire, rt)
			delete(s.doomed, rt)
		}
	}
	sweep := time.Since(s.lastSweep) >= s.opts.SweepInterval
	if sweep {
		s.lastSweep = time.Now()
	}
	s.mu.Unlock()
	s.retire(ctx, retire...)
	if sweep {
		return s.sweep(ctx, live)
	}
	return nil
}

// sweep deletes the cached state and checkpoints that no runtime will use
// again: those of archived projections and of superseded versions whose
// successor is ready. They are left over when a process stops between
// starting a new version and retiring the old one. State in use by another
// process is never touched: every process retires the same keys.
func (s *Service) sweep(ctx context.Context, live map[ref]bool) error {
	cps, err := s.opts.Store.ListCheckpoints(ctx)
	if err != nil {
		return err
	}
	var stale []*runtime
	s.mu.Lock()
	for name := range cps {
		r, key, ok := parseConsumer(name)
		if !ok {
			continue
		}
		t := s.tracked[r]
		switch {
		case t != nil && t.current != nil && t.current.key == key,
			t != nil && t.previous != nil && t.previous.key == key:
			continue // in use here
		case !live[r]:
			if t != nil {
				continue // tracked since the list was read: not archived
			}
		case t == nil || t.current == nil || !t.current.readyFor(s.opts.RetireGrace):
			continue // the current version may still need it, or others may
		}
		stale = append(stale, &runtime{s: s, tenant: r.tenant, configID: r.id, key: key})
	}
	s.mu.Unlock()
	// A config missing from the list may have been created since it was
	// read (by another process too): ask the store before deleting.
	kept := stale[:0]
	for _, rt := range stale {
		if live[ref{rt.tenant, rt.configID}] {
			kept = append(kept, rt)
			continue
		}
		c, err := s.opts.Store.GetConfig(ctx, rt.tenant, rt.configID)
		if err == nil && c.Type == ConfigType && c.Status == store.ConfigActive {
			continue
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		kept = append(kept, rt)
	}
	s.retire(ctx, kept...)
	return nil
}

// parseConsumer reads a projection consumer name back into its config and
// state key ("projection:<tenant>:<config id>:<fingerprint>"; tenant ids
// have no ':').
func parseConsumer(name string) (ref, string, bool) {
	key, ok := strings.CutPrefix(name, "projection:")
	if !ok {
		return ref{}, "", false
	}
	tenant, rest, ok := strings.Cut(key, ":")
	i := strings.LastIndexByte(rest, ':')
	if !ok || i <= 0 {
		return ref{}, "", false
	}
	return ref{tenant, rest[:i]}, key, true
}

// apply makes the runtimes of one config match its stored version c.
func (s *Service) apply(ctx context.Context, c *store.Config) *tracked {
	r := ref{c.TenantID, c.ID}
	s.mu.Lock()
	t := s.tracked[r]
	if t != nil && t.current != nil && t.current.version >= c.Version {
		// The same version, or an older one from a list read before a
		// newer version was applied (the background sync and a caller's
		// Sync overlap): a projection never goes back a version.
		s.mu.Unlock()
		return t
	}
	if s.ctx == nil || s.ctx.Err() != nil {
		s.mu.Unlock()
		return nil
	}
	vkey := c.TenantID + "\x00" + c.ID + "\x00" + strconv.FormatInt(c.Version, 10)
	if s.bad[vkey] {
		s.mu.Unlock()
		return t
	}
	comp, err := compile(c)
	if err != nil {
		s.bad[vkey] = true
		s.mu.Unlock()
		s.log.Warn("projection config is not valid; it does not run", "tenant", c.TenantID, "config_id", c.ID, "version", c.Version, "err", err)
		return t
	}
	if t == nil {
		t = &tracked{since: time.Now()}
		s.tracked[r] = t
	}
	t.name = c.Name
	key := stateKey(c.TenantID, c.ID, comp.fingerprint)
	var retire []*runtime
	var restart *runtime // a runtime on the same state, replaced by the new version
	switch {
	case t.current != nil && t.current.key == key:
		restart = t.current
	case t.previous != nil && t.previous.key == key:
		// Back to the settings of the older version that still serves:
		// its state is complete; the backfilling one is dropped.
		restart = t.previous
		retire = append(retire, t.current)
		t.previous = nil
	case t.current != nil && t.current.isReady():
		if t.previous != nil {
			s.doomLocked(t.previous)
		}
		t.previous = t.current
	case t.current != nil:
		retire = append(retire, t.current)
	}
	for d := range s.doomed {
		if d.key == key {
			delete(s.doomed, d) // its state is this version's again
		}
	}
	rt, err := s.newRuntime(comp, key)
	if err != nil {
		s.bad[vkey] = true
		s.mu.Unlock()
		s.log.Error("projection: cannot build the engine", "tenant", c.TenantID, "config_id", c.ID, "version", c.Version, "err", err)
		return t
	}
	if restart != nil {
		// Same state, so the same readiness, before the runtime is
		// published: a query in between must not see it "not ready".
		rt.inheritReady(restart)
	}
	t.current = rt
	runCtx := s.ctx
	s.mu.Unlock()

	if restart != nil {
		restart.halt()
	}
	s.retire(ctx, retire...)
	rt.start(runCtx)
	s.log.Info("projection started", "tenant", c.TenantID, "config_id", c.ID, "version", c.Version, "state_key", key,
		"backfill", restart == nil)
	return t
}

// doomLocked stops a superseded runtime's consumer now (asynchronously)
// and schedules the deletion of its state after the grace period; s.mu is
// held.
func (s *Service) doomLocked(rt *runtime) {
	s.doomed[rt] = time.Now().Add(s.opts.RetireGrace)
	go rt.halt()
}

// retire stops runtimes for good and deletes their cached state and
// checkpoints.
func (s *Service) retire(ctx context.Context, rts ...*runtime) {
	for _, rt := range rts {
		if rt == nil {
			continue
		}
		rt.halt()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if err := s.opts.State.Delete(dctx, rt.key); err != nil {
			s.log.Warn("projection: delete retired cached state", "state_key", rt.key, "err", err)
		}
		if err := s.opts.Store.DeleteCheckpoint(dctx, rt.consumerName()); err != nil {
			s.log.Warn("projection: delete retired checkpoint", "consumer", rt.consumerName(), "err", err)
		}
		if err := s.opts.Marker.Unmark(dctx, rt.key); err != nil {
			s.log.Warn("projection: delete retired marker", "state_key", rt.key, "err", err)
		}
		cancel()
		if s.opts.Metrics != nil {
			s.opts.Metrics.Forget(rt.consumerName())
		}
		s.log.Info("projection retired", "tenant", rt.tenant, "config_id", rt.configID, "version", rt.version, "state_key", rt.key)
	}
}

// stateKey is the projection key of a runtime in the cached state.
func stateKey(tenant, configID, fingerprint string) string {
	return tenant + ":" + configID + ":" + fingerprint
}

// Status is the state of one running projection.
type Status struct {
	ConfigID string `json:"config_id"`
	Name     string `json:"name,omitempty"`
	Version  int64  `json:"config_version"`
	// Ready is false while the projection backfills.
	Ready bool `json:"ready"`
	// Position is the global position of the last fact processed.
	Position int64 `json:"position"`
	// ServingVersion is the version queries read (an older one while the
	// current one backfills).
	ServingVersion int64 `json:"serving_version"`
}

// Statuses lists the projections running for a tenant, by config id.
func (s *Service) Statuses(tenant string) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Status
	for r, t := range s.tracked {
		if r.tenant != tenant || t.current == nil {
			continue
		}
		st := Status{ConfigID: r.id, Name: t.name, Version: t.current.version, Ready: t.current.isReady(),
			Position: t.current.pos.Load(), ServingVersion: t.serving().version}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConfigID < out[j].ConfigID })
	return out
}

// TenantStatus is a projection of any tenant, for the operator.
type TenantStatus struct {
	Tenant string `json:"tenant"`
	Status
	// State is "ready" or "backfilling".
	State string `json:"status"`
}

// AllStatuses lists the projections running for every tenant, by tenant
// then config id.
func (s *Service) AllStatuses() []TenantStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []TenantStatus{}
	for r, t := range s.tracked {
		if t.current == nil {
			continue
		}
		st := TenantStatus{Tenant: r.tenant, Status: Status{ConfigID: r.id, Name: t.name, Version: t.current.version,
			Ready: t.current.isReady(), Position: t.current.pos.Load(), ServingVersion: t.serving().version}, State: "backfilling"}
		if st.Ready {
			st.State = "ready"
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].ConfigID < out[j].ConfigID
	})
	return out
}

// serving returns the runtime queries read: the current one once ready,
// else an older ready one, else the current one.
func (t *tracked) serving() *runtime {
	if t.previous != nil && !t.current.isReady() && t.previous.isReady() {
		return t.previous
	}
	return t.current
}

// emitter appends the engine's projection.migration_* facts to the
// tenant's log as entity-less facts.
type emitter struct {
	st     store.Store
	tenant string
}

func (e emitter) Emit(ctx context.Context, f projection.Fact) error {
	data, err := jsonObject(f.Data)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	res, err := e.st.AppendFacts(ctx, []store.Append{{Fact: store.Fact{
		ID: id.New(id.Fact), TenantID: e.tenant, Type: f.Type, Timestamp: f.Timestamp, Data: data, CreatedAt: now,
	}}})
	if err != nil {
		return err
	}
	return res[0].Err
}
