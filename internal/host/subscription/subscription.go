// Package subscription runs the domain manifest's subscriptions: each one
// is a durable stream consumer that hands the facts matching its patterns
// (`<type>.<subtype>`) to a subscription-handler plugin and carries out the
// actions the handler returns.
//
// Facts reach a handler at least once (the stream replays from the
// checkpoint after a crash); the effects apply exactly once, because every
// fact a handler's action appends gets an id derived from the triggering
// fact, the subscription and the action's index, and the store refuses a
// second fact with the same id.
package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/internal/lifecycle"
	"github.com/factline/factline/sdk/abi"
)

// Handlers finds the plugin serving a handler name.
type Handlers interface {
	SubscriptionHandler(handler string) (*wasm.Plugin, bool)
}

// maxActions bounds the actions one fact may cause (and the ids checked
// for a handler's own output).
const maxActions = 64

// Options configure a Runner.
type Options struct {
	Platform      *platform.Service
	Store         store.Store
	Handlers      Handlers
	Subscriptions []manifest.Subscription
	Logger        *slog.Logger
	Metrics       *stream.Metrics
	Registerer    prometheus.Registerer
}

// Runner runs every subscription until stopped. The set of subscriptions
// can change while it runs (Set), as the domain model does.
type Runner struct {
	opts    Options
	log     *slog.Logger
	applied *prometheus.CounterVec
	skipped *prometheus.CounterVec
	bg      lifecycle.Base

	mu      sync.Mutex
	subs    []manifest.Subscription
	running map[string]*consumer     // by subscription name
	last    map[string]chan struct{} // done of the latest consumer of a name
}

// consumer is the stream consumer of one subscription as it runs.
type consumer struct {
	sub  manifest.Subscription
	stop context.CancelFunc
	done chan struct{}
}

// New checks the options.
func New(opts Options) (*Runner, error) {
	if opts.Platform == nil || opts.Store == nil || opts.Handlers == nil {
		return nil, errors.New("subscription: platform, store and handlers are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Runner{opts: opts, log: opts.Logger, subs: opts.Subscriptions, running: map[string]*consumer{}, last: map[string]chan struct{}{},
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "factline_subscription_actions_total", Help: "Actions carried out for subscriptions (duplicates of earlier deliveries excluded)."}, []string{"subscription"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "factline_subscription_actions_skipped_total", Help: "Actions refused by the platform (missing entity, rule) and skipped."}, []string{"subscription", "reason"}),
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{r.applied, r.skipped} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("subscription: register metrics: %w", err)
			}
		}
	}
	return r, nil
}

// ConsumerName is the stream consumer of a subscription.
func ConsumerName(sub string) string { return "subscription:" + sub }

// Start launches one consumer per subscription, until Stop; a second
// Start is an error.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.bg.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("subscription: %w", err)
	}
	r.reconcileLocked()
	return nil
}

// Stop stops every consumer and waits for them, within ctx.
func (r *Runner) Stop(ctx context.Context) error {
	return r.bg.Stop(ctx)
}

// Set makes subs the subscriptions that run: a new one starts reading
// (from its checkpoint, or from the start of the stream when it has none),
// a removed one stops (its checkpoint stays, so declaring it again goes
// on where it stopped), and one whose patterns or handler changed restarts
// on its checkpoint with the new declaration. Before Start it only records
// the set.
func (r *Runner) Set(subs []manifest.Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs = slices.Clone(subs)
	if r.bg.Context() != nil {
		r.reconcileLocked()
	}
}

// Running lists the subscriptions with a consumer, by name.
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.running))
}

// reconcileLocked starts and stops consumers until one runs per
// subscription of r.subs; r.mu is held.
func (r *Runner) reconcileLocked() {
	want := map[string]manifest.Subscription{}
	for _, s := range r.subs {
		want[s.Name] = s
	}
	for name, c := range r.running {
		if s, ok := want[name]; ok && sameSubscription(s, c.sub) {
			continue
		}
		c.stop()
		delete(r.running, name)
		if _, ok := want[name]; !ok {
			r.log.Info("subscription stopped: no longer declared", "subscription", name)
		}
	}
	for _, s := range r.subs {
		if _, ok := r.running[s.Name]; ok {
			continue
		}
		r.launchLocked(s)
	}
}

// launchLocked starts the consumer of s; r.mu is held. It first waits
// for the consumer of the same name that ran before, if it is still
// stopping: two readers must not move one checkpoint.
func (r *Runner) launchLocked(s manifest.Subscription) {
	ctx, stop := context.WithCancel(r.bg.Context())
	c := &consumer{sub: s, stop: stop, done: make(chan struct{})}
	prev := r.last[s.Name]
	reader := &stream.Consumer{
		Name:    ConsumerName(s.Name),
		Store:   r.opts.Store,
		Handler: r.handler(s),
		Logger:  r.log,
		Metrics: r.opts.Metrics,
	}
	if !r.bg.Go(func(context.Context) {
		defer close(c.done)
		defer stop()
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return
			}
		}
		if err := reader.Run(ctx); err != nil {
			r.log.Error("subscription stopped", "subscription", s.Name, "err", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, declared := r.running[s.Name]; !declared && r.opts.Metrics != nil {
			r.opts.Metrics.Forget(reader.Name)
		}
	}) {
		stop()
		return
	}
	r.running[s.Name] = c
	r.last[s.Name] = c.done
}

func sameSubscription(a, b manifest.Subscription) bool {
	return a.Handler == b.Handler && slices.Equal(a.Patterns, b.Patterns)
}

func matches(sub manifest.Subscription, f *store.Fact) bool {
	key := f.Type + "." + f.Subtype
	for _, p := range sub.Patterns {
		if p == key {
			return true
		}
	}
	return false
}

// ActionFactID is the id of the fact appended by action i of sub for the
// triggering fact.
func ActionFactID(triggering, sub string, i int) string {
	return id.Derive(id.Fact, triggering, "subscription", sub, strconv.Itoa(i))
}

// ownOutput reports whether f was appended by this subscription, so a
// handler never reacts to its own effects in a loop.
func ownOutput(sub string, f *store.Fact) bool {
	if f.SourceID == "" {
		return false
	}
	for i := 0; i < maxActions; i++ {
		if ActionFactID(f.SourceID, sub, i) == f.ID {
			return true
		}
	}
	return false
}

func (r *Runner) handler(sub manifest.Subscription) stream.Handler {
	return func(ctx context.Context, facts []store.Fact) error {
		for i := range facts {
			f := &facts[i]
			if !matches(sub, f) || ownOutput(sub.Name, f) {
				continue
			}
			if err := r.deliver(ctx, sub, f); err != nil {
				return err
			}
		}
		return nil
	}
}

// deliver hands one fact to the handler and applies its actions. An error
// makes the stream retry the batch (facts already applied are skipped as
// duplicates then).
func (r *Runner) deliver(ctx context.Context, sub manifest.Subscription, f *store.Fact) error {
	p, ok := r.opts.Handlers.SubscriptionHandler(sub.Handler)
	if !ok {
		return fmt.Errorf("subscription %s: no loaded plugin serves handler %q", sub.Name, sub.Handler)
	}
	res, err := p.Handle(ctx, abi.HandleInput{Handler: sub.Handler, Fact: abi.Fact{
		ID: f.ID, Type: f.Type, Subtype: f.Subtype, TenantID: f.TenantID, EntityID: f.EntityID, EntityType: f.EntityType,
		Seq: f.Seq, Position: f.Position, SourceID: f.SourceID, Timestamp: f.Timestamp, Data: f.Data,
	}})
	if err != nil {
		var ce *wasm.CallError
		if errors.As(err, &ce) {
			// The handler refused this fact: retrying cannot change that.
			r.log.Warn("subscription handler refused a fact", "subscription", sub.Name, "fact", f.ID, "code", ce.Code, "message", ce.Message)
			r.skipped.WithLabelValues(sub.Name, "handler_error").Inc()
			return nil
		}
		return fmt.Errorf("subscription %s: handle %s: %w", sub.Name, f.ID, err)
	}
	if len(res.Actions) > maxActions {
		// Skipped like any action the platform refuses: counted and
		// logged, the fact's first maxActions carried out.
		r.log.Warn("subscription handler returned more actions than one fact may cause; the rest are skipped",
			"subscription", sub.Name, "fact", f.ID, "actions", len(res.Actions), "carried_out", maxActions)
		r.skipped.WithLabelValues(sub.Name, "too_many_actions").Add(float64(len(res.Actions) - maxActions))
		res.Actions = res.Actions[:maxActions]
	}
	for i, a := range res.Actions {
		if a.Kind != abi.ActionAppend {
			r.log.Warn("unknown subscription action skipped", "subscription", sub.Name, "kind", a.Kind)
			r.skipped.WithLabelValues(sub.Name, "unknown_action").Inc()
			continue
		}
		data, err := decodeData(a.Data)
		if err != nil {
			r.skipped.WithLabelValues(sub.Name, "bad_data").Inc()
			continue
		}
		_, err = r.opts.Platform.AppendFact(ctx, f.TenantID, platform.AppendFactInput{
			ID: ActionFactID(f.ID, sub.Name, i), EntityID: a.EntityID, Type: a.Type, Subtype: a.Subtype,
			Data: data, SourceID: f.ID, TraceID: f.TraceID,
		})
		pe, refused := platform.Refusal(err)
		switch {
		case err == nil:
			r.applied.WithLabelValues(sub.Name).Inc()
		case errors.Is(err, platform.ErrDuplicateFact):
			// Applied by an earlier delivery of the same fact.
		case refused:
			r.log.Warn("subscription action refused", "subscription", sub.Name, "fact", f.ID, "action", i, "status", pe.Kind.Status, "detail", pe.Detail)
			r.skipped.WithLabelValues(sub.Name, pe.Kind.Slug).Inc()
		default:
			return fmt.Errorf("subscription %s: apply action %d of %s: %w", sub.Name, i, f.ID, err)
		}
	}
	return nil
}

func decodeData(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	return platform.DecodeObject(raw)
}
