package manifest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/factline/factline/internal/host/store"
)

// ChangeEnv is what a change of the domain model is checked against.
type ChangeEnv struct {
	// Usage describes the stored data.
	Usage store.DomainUsageStore
	// LedgerInstalled reports whether a ledger name is built in or declared
	// by an installed plugin (loaded or not yet loaded on this process).
	LedgerInstalled func(ctx context.Context, name string) (bool, error)
	// LedgerEntityTypes, when set, tells the entity types a ledger
	// declares it serves; known is false when this process cannot tell
	// (a built-in ledger serves any type; a plugin not loaded here).
	LedgerEntityTypes func(name string) (types []string, known bool)
	// PluginKind, when set, tells the kind of the plugin of that name
	// loaded here ("ledger", "subscription"), or "" when none is.
	PluginKind func(name string) string
	// HandlerServed, when set, reports whether an installed subscription
	// plugin serves a handler name; it answers true when this process
	// cannot tell (a plugin installed but not loaded here yet).
	HandlerServed func(ctx context.Context, handler string) (bool, error)
}

// CheckChange checks a new domain model against the one being served and
// the stored data: an entity type with stored entities stays declared; a
// field with data is not removed, retyped or moved to another slot; a
// required field is present in every stored entity; a slot holding data
// keeps holding the same field; a fact type recorded on the type stays
// declared, and a field of its schema that stored facts have is neither
// removed nor retyped; a new or changed ledger name resolves; a new or
// changed subscription handler is served. Types that did not
// change are not looked at again. Problems are returned together as an
// *Error, each at the new manifest's line and column where it has one;
// a failing store is returned as a plain wrapped error.
func CheckChange(ctx context.Context, cur, next *Domain, env ChangeEnv) error {
	var diags []Diagnostic
	problem := func(at Diagnostic, format string, args ...any) {
		at.Message = fmt.Sprintf(format, args...)
		diags = append(diags, at)
	}
	for _, name := range cur.EntityTypeNames() {
		if _, ok := next.Entities[name]; ok {
			continue
		}
		u, err := env.Usage.EntityTypeUsage(ctx, name)
		if err != nil {
			return fmt.Errorf("check domain change: %w", err)
		}
		if u.Entities > 0 {
			problem(cur.Entities[name].pos, "entities.%s: removes an entity type %d stored entities have", name, u.Entities)
		}
	}
	for _, name := range next.EntityTypeNames() {
		t, old := next.Entities[name], cur.Entities[name]
		what := "entities." + name
		if old == nil || old.Ledger != t.Ledger {
			ok, err := env.LedgerInstalled(ctx, t.Ledger)
			if err != nil {
				return fmt.Errorf("check domain change: %w", err)
			}
			if !ok {
				problem(t.pos, "%s.ledger: no built-in ledger or installed plugin is named %q", what, t.Ledger)
			} else if msg := ledgerPluginProblem(name, t, env.PluginKind, env.LedgerEntityTypes); msg != "" {
				problem(t.pos, "%s", msg)
			}
		}
		if old != nil {
			ds, err := checkFactSchemaChange(ctx, old, t, env.Usage)
			if err != nil {
				return fmt.Errorf("check domain change: %w", err)
			}
			diags = append(diags, ds...)
		}
		if unchanged(old, t) {
			continue
		}
		u, err := env.Usage.EntityTypeUsage(ctx, name)
		if err != nil {
			return fmt.Errorf("check domain change: %w", err)
		}
		if u.Entities == 0 {
			continue
		}
		if old != nil {
			for _, of := range old.Fields {
				n := u.Keys[of.Name]
				f, ok := t.Field(of.Name)
				switch {
				case n == 0:
				case !ok:
					problem(t.pos, "%s: removes field %q, which %d stored entities have", what, of.Name, n)
				case f.Type != of.Type:
					problem(f.pos, "%s.fields.%s: retypes field from %s to %s, which %d stored entities have", what, f.Name, of.Type, f.Type, n)
				case f.Storage != of.Storage:
					problem(f.pos, "%s.fields.%s: moves field from slot %q to %q, which %d stored entities fill", what, f.Name, of.Storage, f.Storage, n)
				}
			}
			for _, ft := range old.Facts {
				if t.AllowsFact(ft) {
					continue
				}
				used, err := env.Usage.FactTypeInUse(ctx, name, ft)
				if err != nil {
					return fmt.Errorf("check domain change: %w", err)
				}
				if used {
					problem(t.pos, "%s.facts: removes fact type %q, which facts of stored entities have", what, ft)
				}
			}
		}
		for _, f := range t.Fields {
			if f.Required && u.Keys[f.Name] < u.Entities {
				problem(f.pos, "%s.fields.%s: required, but %d of %d stored entities lack it", what, f.Name, u.Entities-u.Keys[f.Name], u.Entities)
			}
		}
		slots := make([]string, 0, len(u.Slots))
		for s := range u.Slots {
			slots = append(slots, s)
		}
		sort.Strings(slots)
		for _, slot := range slots {
			n := u.Slots[slot]
			i := slices.IndexFunc(t.Fields, func(f Field) bool { return f.Storage == slot })
			if i < 0 {
				problem(t.pos, "%s: slot %s holds values of %d stored entities, and no field is declared on it", what, slot, n)
				continue
			}
			f := t.Fields[i]
			if old != nil {
				if j := slices.IndexFunc(old.Fields, func(of Field) bool { return of.Storage == slot }); j >= 0 && old.Fields[j].Name != f.Name {
					problem(f.pos, "%s.fields.%s: reuses slot %s, which holds field %q of %d stored entities", what, f.Name, slot, old.Fields[j].Name, n)
				}
				continue
			}
			// A type declared again after it was dropped: the slot was
			// filled from some field; it can only be this one if at least
			// as many entities have it.
			if u.Keys[f.Name] < n {
				problem(f.pos, "%s.fields.%s: slot %s holds values of %d stored entities, but only %d have field %q", what, f.Name, slot, n, u.Keys[f.Name], f.Name)
			}
		}
	}
	if env.HandlerServed != nil {
		for _, s := range next.Subscriptions {
			if i := slices.IndexFunc(cur.Subscriptions, func(o Subscription) bool { return o.Name == s.Name }); i >= 0 && cur.Subscriptions[i].Handler == s.Handler {
				continue
			}
			ok, err := env.HandlerServed(ctx, s.Handler)
			if err != nil {
				return fmt.Errorf("check domain change: %w", err)
			}
			if !ok {
				problem(s.pos, "subscriptions.%s.handler: no installed subscription plugin serves handler %q", s.Name, s.Handler)
			}
		}
	}
	if len(diags) > 0 {
		return &Error{Diagnostics: diags}
	}
	return nil
}

// CheckLedgers holds each entity type of d against its ledger as
// CheckChange holds a new or re-ledgered one: a built-in ledger or an
// installed plugin must be named, and a plugin must be a ledger that
// serves the type. It is for a manifest refused for other problems
// (ParseDomainLedgers), so that one answer lists every problem. Problems
// are returned together as an *Error.
func CheckLedgers(ctx context.Context, d *Domain, env ChangeEnv) error {
	var diags []Diagnostic
	for _, name := range d.EntityTypeNames() {
		t := d.Entities[name]
		ok, err := env.LedgerInstalled(ctx, t.Ledger)
		if err != nil {
			return fmt.Errorf("check ledgers: %w", err)
		}
		msg := ledgerPluginProblem(name, t, env.PluginKind, env.LedgerEntityTypes)
		if !ok {
			msg = fmt.Sprintf("entities.%s.ledger: no built-in ledger or installed plugin is named %q", name, t.Ledger)
		}
		if msg != "" {
			diags = append(diags, t.At(msg))
		}
	}
	if len(diags) > 0 {
		return &Error{Diagnostics: diags}
	}
	return nil
}

// CheckLedgerPlugins checks each entity type whose ledger names a plugin
// the functions know: it must be a ledger plugin, and one that declares
// the type. kind tells a plugin's kind ("" when no plugin of that name is
// known); types tells the entity types a ledger declares (known false
// when it cannot tell). Problems are returned together as an *Error.
func CheckLedgerPlugins(d *Domain, kind func(name string) string, types func(name string) ([]string, bool)) error {
	var diags []Diagnostic
	for _, name := range d.EntityTypeNames() {
		t := d.Entities[name]
		if msg := ledgerPluginProblem(name, t, kind, types); msg != "" {
			at := t.pos
			at.Message = msg
			diags = append(diags, at)
		}
	}
	if len(diags) > 0 {
		return &Error{Diagnostics: diags}
	}
	return nil
}

// ledgerPluginProblem says what is wrong with entity type name's ledger
// plugin, or "": a plugin of another kind serves no entity type, and a
// ledger plugin refuses entities of types it does not declare, so every
// command on them would fail.
func ledgerPluginProblem(name string, t *EntityType, kind func(string) string, types func(string) ([]string, bool)) string {
	what := "entities." + name
	if kind != nil {
		if k := kind(t.Ledger); k != "" && k != "ledger" {
			return fmt.Sprintf("%s.ledger: plugin %q is a %s plugin, not a ledger", what, t.Ledger, k)
		}
	}
	if types != nil {
		if ts, known := types(t.Ledger); known && !contains(ts, name) {
			return fmt.Sprintf("%s.ledger: ledger %q serves entity types %s, not %q (a type without a ledger plugin of its own takes ledger: builtin)",
				what, t.Ledger, strings.Join(ts, ", "), name)
		}
	}
	return ""
}

// unchanged reports whether t declares the same ledger and fields as old
// and keeps its fact types: nothing stored can contradict it then.
func unchanged(old, t *EntityType) bool {
	if old == nil || old.Ledger != t.Ledger || len(old.Fields) != len(t.Fields) {
		return false
	}
	for _, of := range old.Fields {
		f, ok := t.Field(of.Name)
		if !ok || f.Type != of.Type || f.Storage != of.Storage || f.Required != of.Required || !slices.Equal(f.Enum, of.Enum) {
			return false
		}
	}
	for _, ft := range old.Facts {
		if !t.AllowsFact(ft) {
			return false
		}
	}
	return true
}
