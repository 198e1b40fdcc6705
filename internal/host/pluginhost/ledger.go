package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/tracing"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/sdk/abi"
)

// Ledgers resolves ledger names: built-in ledgers first, then ledger
// plugins by name. A name that is neither resolves to a ledger that uses
// the plugin once it is loaded; until then it answers 503 while the name
// is Loading, Refused or Awaited, and stands in the built-in generic
// ledger otherwise (a name no entity type of the model needs).
type Ledgers struct {
	Builtin  ledger.Static
	Registry *wasm.Registry
	// Loading, when set, reports names still loading at start-up: their
	// entity types answer 503 until then instead of running without
	// their rules.
	Loading func(name string) bool
	// Refused, when set, reports names whose plugin the start-up load
	// refused (it does not fit the manifests): their entity types answer
	// 503 until a version that fits is loaded, never the fallback.
	Refused func(name string) bool
	// Awaited, when set, reports names no plugin loaded here serves while
	// entity types need them (not installed, or installed and not loaded
	// here yet): their types answer 503 too, never the fallback.
	Awaited func(name string) bool
	// Commands, when set, keeps the plugins' command lists across calls.
	Commands *CommandCache
}

var _ ledger.Registry = Ledgers{}

// Ledger implements ledger.Registry.
func (l Ledgers) Ledger(name string) (ledger.Ledger, bool) {
	if b, ok := l.Builtin.Ledger(name); ok {
		return b, true
	}
	return &pluginLedger{name: name, reg: l.Registry, fallback: ledger.Generic{}, loading: l.Loading, refused: l.Refused, awaited: l.Awaited, specs: l.Commands}, true
}

// Missing lists the names of a set of ledger names that are neither
// built in nor loaded as ledger plugins (a subscription plugin of the
// name serves no entity type).
func (l Ledgers) Missing(names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := l.Builtin.Ledger(n); ok {
			continue
		}
		if p, ok := l.Registry.Get(n); !ok || p.Description().Kind != abi.KindLedger {
			out = append(out, n)
		}
	}
	return out
}

// Described returns the commands of a ledger by name as far as this
// process knows them: none for a built-in ledger, the description of a
// loaded plugin; ok is false for a plugin not loaded here.
func (l Ledgers) Described(name string) (cmds []ledger.CommandSpec, ok bool) {
	if _, ok := l.Builtin.Ledger(name); ok {
		return nil, true
	}
	if l.Registry == nil {
		return nil, false
	}
	pl := &pluginLedger{name: name, reg: l.Registry}
	if _, ok := pl.current(); !ok {
		return nil, false
	}
	return pl.Commands(), true
}

// EntityTypes returns the entity types a ledger plugin loaded here
// declares; known is false for a built-in ledger (it serves any type) and
// for a plugin not loaded here.
func (l Ledgers) EntityTypes(name string) (types []string, known bool) {
	if _, ok := l.Builtin.Ledger(name); ok || l.Registry == nil {
		return nil, false
	}
	p, ok := (&pluginLedger{name: name, reg: l.Registry}).current()
	if !ok {
		return nil, false
	}
	types = p.Description().EntityTypes
	return types, len(types) > 0
}

// pluginLedger adapts the current version of a ledger plugin.
type pluginLedger struct {
	name     string
	reg      *wasm.Registry
	fallback ledger.Ledger
	loading  func(string) bool
	refused  func(string) bool
	awaited  func(string) bool

	specs *CommandCache // nil: commands are listed on every call
}

// CommandCache keeps, per ledger plugin name, the commands of the version
// loaded now: every command request looks its route up in them, and
// listing them copies the plugin's description. The zero value is ready
// to use; an entry is replaced when a new version is loaded.
type CommandCache struct {
	byName sync.Map // plugin name -> *commandSpecs
}

// commandSpecs are the commands one loaded plugin version serves.
type commandSpecs struct {
	plugin *wasm.Plugin
	list   []ledger.CommandSpec
}

// errLoading is answered while the plugin is still loading at start-up.
func (l *pluginLedger) errLoading() error {
	if l.refused != nil && l.refused(l.name) {
		pe := problem.Newf(problem.Unavailable, "The %s ledger plugin was refused at start-up: the manifests name what it lacks (the log says what); "+
			"its entity types answer 503 until a version that fits is loaded", l.name)
		pe.Headers = map[string]string{"Retry-After": "30"}
		return pe
	}
	if l.loading == nil || !l.loading(l.name) {
		pe := problem.Newf(problem.Unavailable, "The %s ledger plugin is not loaded on this process yet; retry in a few seconds "+
			"(one not installed anywhere is installed with PUT /v1/admin/plugins/%s)", l.name, l.name)
		pe.Headers = map[string]string{"Retry-After": "5"}
		return pe
	}
	pe := problem.Newf(problem.Unavailable, "The %s ledger plugin is still loading; retry in a few seconds", l.name)
	pe.Headers = map[string]string{"Retry-After": "5"}
	return pe
}

var (
	_ ledger.Ledger    = (*pluginLedger)(nil)
	_ ledger.Commander = (*pluginLedger)(nil)
	_ ledger.Loader    = (*pluginLedger)(nil)
)

// NotReady implements ledger.Loader: the loading problem while the plugin
// is not loaded here but still loading at start-up.
func (l *pluginLedger) NotReady() error {
	if _, ok := l.current(); !ok && l.stillLoading() {
		return l.errLoading()
	}
	return nil
}

// stillLoading reports whether the plugin, not loaded here, is one still
// loading at start-up (rather than one to stand in for with the fallback).
func (l *pluginLedger) stillLoading() bool {
	return l.loading != nil && l.loading(l.name) || l.refused != nil && l.refused(l.name) || l.awaited != nil && l.awaited(l.name)
}

func (l *pluginLedger) current() (*wasm.Plugin, bool) {
	p, ok := l.reg.Get(l.name)
	if !ok || p.Kind() != abi.KindLedger {
		return nil, false
	}
	return p, true
}

func (l *pluginLedger) Name() string { return l.name }

// StateDependent: a plugin's decisions read the entity's state.
func (l *pluginLedger) StateDependent() bool {
	_, ok := l.current()
	return ok
}

// Commands lists the current version's commands. The list is built once
// per loaded version and shared: callers must not modify it.
func (l *pluginLedger) Commands() []ledger.CommandSpec {
	p, ok := l.current()
	if !ok {
		return nil
	}
	if l.specs != nil {
		if c, ok := l.specs.byName.Load(l.name); ok && c.(*commandSpecs).plugin == p {
			return c.(*commandSpecs).list
		}
	}
	cmds := p.Description().Commands
	out := make([]ledger.CommandSpec, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, ledger.CommandSpec{Name: c.Name, Method: c.Method, Path: c.Path, ReadOnly: c.ReadOnly, Emits: c.Emits, Description: c.Description,
			InputSchema: c.InputSchema, ResultSchema: c.ResultSchema})
	}
	if l.specs != nil {
		l.specs.byName.Store(l.name, &commandSpecs{plugin: p, list: out})
	}
	return out
}

func (l *pluginLedger) Decide(ctx context.Context, state json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	p, ok := l.current()
	if !ok {
		if l.stillLoading() {
			return ledger.Decision{}, l.errLoading()
		}
		return l.fallback.Decide(ctx, state, cmd)
	}
	ctx, span := tracing.Child(ctx, "plugin.decide")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("factline.plugin", l.name), attribute.String("factline.command", cmd.Name))
	}
	res, err := p.Decide(ctx, abi.DecideInput{
		Command: cmd.Name,
		Entity:  abi.EntityRef{ID: cmd.EntityID, Type: cmd.EntityType, TenantID: cmd.TenantID, Version: cmd.EntityVersion},
		State:   nullIfEmpty(state),
		Input:   nullIfEmpty(cmd.Input),
		Now:     cmd.Now,
	})
	tracing.End(span, err)
	if err != nil {
		return ledger.Decision{}, callErr(l.name, err)
	}
	d := ledger.Decision{Result: res.Result}
	for _, f := range res.Facts {
		d.Facts = append(d.Facts, ledger.NewFact{Type: f.Type, Subtype: f.Subtype, Timestamp: f.Timestamp, Data: f.Data})
	}
	return d, nil
}

func (l *pluginLedger) Evolve(ctx context.Context, state json.RawMessage, fact json.RawMessage) (json.RawMessage, error) {
	p, ok := l.current()
	if !ok {
		if l.stillLoading() {
			return nil, l.errLoading()
		}
		return l.fallback.Evolve(ctx, state, fact)
	}
	var f abi.Fact
	if err := json.Unmarshal(fact, &f); err != nil {
		return nil, fmt.Errorf("plugins: decode fact for evolve: %w", err)
	}
	ctx, span := tracing.Child(ctx, "plugin.evolve")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("factline.plugin", l.name))
	}
	next, err := p.Evolve(ctx, abi.EvolveInput{State: nullIfEmpty(state), Fact: f})
	tracing.End(span, err)
	if err != nil {
		return nil, callErr(l.name, err)
	}
	return next, nil
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// callErr maps a plugin call's failure to what the platform reports: a
// refusal becomes a 422, bad input a validation problem, an unknown
// command a 400, a deadline a 504 and a trap or panic a 500.
func callErr(name string, err error) error {
	var ce *wasm.CallError
	var te *wasm.TrapError
	switch {
	case errors.As(err, &ce):
		switch ce.Status {
		case abi.StatusBusinessError:
			return &ledger.BusinessError{Code: ce.Code, Message: ce.Message}
		case abi.StatusBadInput:
			field := ce.Field
			if field == "" {
				field = "input"
			}
			code := ce.Code
			if code == "" {
				code = problem.CodeFormat
			}
			return problem.Validation([]problem.FieldError{{Field: field, Code: code, Message: ce.Message}})
		case abi.StatusUnknownCommand, abi.StatusUnsupported:
			return fmt.Errorf("%w: %s", ledger.ErrUnknownCommand, ce.Message)
		default:
			return problem.Wrap(problem.Internal, "The entity's ledger plugin failed; quote the trace_id when reporting it", err)
		}
	case errors.As(err, &te) && te.Timeout:
		return problem.Wrap(problem.Timeout, fmt.Sprintf("The %s plugin did not answer within its deadline", name), err)
	case errors.As(err, &te):
		return problem.Wrap(problem.Internal, "The entity's ledger plugin failed; quote the trace_id when reporting it", err)
	}
	return err
}
