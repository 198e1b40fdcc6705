// Package platform implements the rules of Factline's three primitives,
// entities, facts and configs, on top of a [store.Store]: validation against
// the domain manifest, ledger decisions, tenant scoping, optimistic
// concurrency and group-committed fact appends. "The contract" in this
// package is the API README.md states ("The platform API"); Refusal tells
// its rule problems from failures.
//
// Every method takes the caller's tenant explicitly; nothing in this package
// can read or write across tenants. User-facing failures are returned as
// *problem.Error so that every transport reports them the same way.
package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/entitycache"
)

// Options configure a Service.
type Options struct {
	Store   store.Store
	Domain  *manifest.Domain
	Ledgers ledger.Registry
	Logger  *slog.Logger
	// Now returns the current time; defaults to time.Now.
	Now func() time.Time
	// MaxBatch bounds how many fact appends are committed together
	// (default 128).
	MaxBatch int
	// EntityCache bounds the read cache of GetEntity. The cache is used
	// only with a store that announces the entity changes of every process
	// sharing it (a store.EntityFeed: Postgres and SQLite); see
	// internal/host/store/entitycache.
	EntityCache entitycache.Options
	// NoEntityCache turns the read cache off.
	NoEntityCache bool
	// ModelBehind, when set, reports whether a change of the domain model
	// is stored but not applied here yet; an unknown entity type is then a
	// 503 to retry, not the client's 400. Called only for unknown types.
	ModelBehind func() bool
	// RoutesBehind, when set, reports whether a stored change of the
	// domain model that may add routes (a manifest new here, or another
	// version of one) is not applied on this process yet.
	RoutesBehind func() bool
}

// Service is the platform. It is safe for concurrent use.
type Service struct {
	store    store.Store
	domain   atomic.Pointer[manifest.Domain]
	ledgers  ledger.Registry
	log      *slog.Logger
	now      func() time.Time
	appender *appender
	locks    *stripedLock
	configs  map[string]ConfigCheck
	// modelBehind is Options.ModelBehind.
	modelBehind func() bool
	// routesBehind is Options.RoutesBehind.
	routesBehind func() bool

	// cache serves GetEntity when the store has an entity feed; nil
	// otherwise. stopWatch ends its feed.
	cache     *entitycache.Cache
	stopWatch context.CancelFunc
}

// New checks the options, applies defaults and starts the group-commit
// appender. Call Close to stop it.
func New(opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("platform: a store is required")
	}
	if opts.Domain == nil {
		return nil, errors.New("platform: a domain manifest is required")
	}
	if opts.Ledgers == nil {
		opts.Ledgers = ledger.Fallback{Static: ledger.Builtin()}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 128
	}
	s := &Service{
		store:   opts.Store,
		ledgers: opts.Ledgers,
		log:     opts.Logger,
		now:     opts.Now,
		configs: map[string]ConfigCheck{},

		modelBehind:  opts.ModelBehind,
		routesBehind: opts.RoutesBehind,
	}
	if err := s.SetDomain(opts.Domain); err != nil {
		return nil, err
	}
	if feed, ok := opts.Store.(store.EntityFeed); ok && !opts.NoEntityCache {
		c := entitycache.New(opts.EntityCache)
		ctx, cancel := context.WithCancel(context.Background())
		if err := feed.WatchEntities(ctx, c); err != nil {
			cancel()
			return nil, fmt.Errorf("platform: entity cache: %w", err)
		}
		s.cache, s.stopWatch = c, cancel
	}
	s.appender = newAppender(opts.Store, opts.MaxBatch)
	s.locks = newStripedLock(1024)
	return s, nil
}

// Close stops the appender after the batches in flight are committed, and
// the entity cache's feed.
func (s *Service) Close() {
	s.appender.close()
	if s.stopWatch != nil {
		s.stopWatch()
	}
}

// EntityCache returns the read cache of GetEntity, nil when there is none.
func (s *Service) EntityCache() *entitycache.Cache { return s.cache }

// changed tells the entity cache and the writers' read marks (see
// loadForWrite) that a write to the entity has returned, whatever its
// outcome: a write that failed may still have committed.
func (s *Service) changed(tenant, entityID string) {
	s.locks.stripe(tenant, entityID).wrote()
	if s.cache != nil {
		s.cache.Invalidate(tenant, entityID)
	}
}

// Store returns the underlying store.
func (s *Service) Store() store.Store { return s.store }

// Domain returns the domain manifest the service validates against.
func (s *Service) Domain() *manifest.Domain { return s.domain.Load() }

// SetDomain swaps the domain manifest (for example when a reloaded gateway
// manifest declares new entity types). Every entity type must name a
// registered ledger; on error the current domain stays.
func (s *Service) SetDomain(d *manifest.Domain) error {
	for _, name := range d.EntityTypeNames() {
		t := d.Entities[name]
		if _, ok := s.ledgers.Ledger(t.Ledger); !ok {
			return fmt.Errorf("platform: entity type %q names ledger %q, which is not registered", name, t.Ledger)
		}
	}
	s.domain.Store(d)
	return nil
}

func (s *Service) nowMS() int64 { return s.now().UnixMilli() }

// entityType resolves a type name or returns the contract's bad request.
func (s *Service) entityType(name string) (*manifest.EntityType, error) {
	if t, ok := s.domain.Load().Entities[name]; ok {
		return t, nil
	}
	return nil, s.unknownType("Unknown entity type: " + name)
}

// storedType resolves the type of a stored entity. A type the domain no
// longer declares (a restart or reload without its manifest) is the
// contract's unknown entity type, said of the entity the client named
// rather than of a type it never sent; never a server error.
func (s *Service) storedType(e *store.Entity) (*manifest.EntityType, error) {
	if t, ok := s.domain.Load().Entities[e.Type]; ok {
		return t, nil
	}
	return nil, s.unknownType(fmt.Sprintf("Unknown entity type: %s (the type of entity %s, which no domain manifest declares now)", e.Type, shownID(e.ID)))
}

// unknownType is the problem, saying detail, for a type the domain does
// not declare: a 503 to retry while a stored change of the model is not
// applied here yet (it may declare the type), else the contract's bad
// request.
func (s *Service) unknownType(detail string) error {
	if s.modelBehind != nil && s.modelBehind() {
		return modelUpdating(detail)
	}
	return problem.New(problem.BadRequest, detail)
}

// ModelUpdating returns the 503 to retry (naming what) while a stored
// change of the domain model that may add routes is not applied on this
// process yet, and nil otherwise: a route the change adds is then about to
// be served here. A removal adds none, so it leaves a 404 a 404.
func (s *Service) ModelUpdating(what string) *problem.Error {
	if s == nil || s.routesBehind == nil || !s.routesBehind() {
		return nil
	}
	return modelUpdating(what)
}

// modelUpdating is the 503 to retry for what a stored change of the
// domain model, not applied on this process yet, may settle.
func modelUpdating(what string) *problem.Error {
	pe := problem.New(problem.Unavailable, what+"; the domain model is being updated on this process, retry in a few seconds")
	pe.Headers = map[string]string{"Retry-After": "2"}
	return pe
}

func (s *Service) ledgerFor(t *manifest.EntityType) ledger.Ledger {
	l, _ := s.ledgers.Ledger(t.Ledger) // checked in New
	return l
}

func entityNotFound(id string) error {
	return problem.Newf(problem.NotFound, "Entity %s not found", shownID(id))
}

// shownID is an id as a problem's detail shows it: as sent when it is at
// most 128 bytes of printable characters, else quoted with its
// unprintable characters escaped and cut to 64 characters, so that a
// right-to-left override or a 3,000-character id sent to look something
// up does not reorder or flood the text read back (and logged, and shown
// in the console).
func shownID(id string) string {
	if len(id) > 0 && len(id) <= 128 && strings.IndexFunc(id, func(r rune) bool { return !strconv.IsPrint(r) }) < 0 {
		return id
	}
	if r := []rune(id); len(r) > 64 {
		return strconv.QuoteToASCII(string(r[:64])) + "..."
	}
	return strconv.QuoteToASCII(id)
}

// storeErr maps an unexpected store error to an internal problem, keeping
// the cause for logs.
func storeErr(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return problem.Wrap(problem.Timeout, "The request took too long and was abandoned", err)
	}
	return fmt.Errorf("platform: %s: %w", op, err)
}
