package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/pluginhost"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/sdk/abi"
)

// servedModel is the domain model and the routes being served, as the
// checks of new plugin versions read them.
type servedModel struct {
	domain *manifest.Domain
	routes *manifest.Gateway // nil: no routes of a manifest
}

// checkPlugin is the check every new plugin version passes before it
// serves: the smoke run, then that it fits the model being served.
func (a *App) checkPlugin(ctx context.Context, p *wasm.Plugin) error {
	if err := pluginhost.Smoke(ctx, p); err != nil {
		return err
	}
	err := a.checkPluginFits(p)
	if err != nil && !a.startupDone.Load() {
		a.startupMu.Lock()
		a.startupMisfits[p.Description().Name] = err
		a.startupMu.Unlock()
	}
	return err
}

// checkPluginFits refuses a ledger plugin version that would break the
// model being served: every entity type the domain model gives the
// ledger must be one the version serves, and every command route to it a
// command it has, taking the route's method. A domain change is checked
// against the loaded plugins the same way (manifest.CheckChange,
// CheckCommands); without this check an upload that dropped a type or a
// command broke every request on them, with the data still stored.
//
// A version of the other kind under the same name is held to both: a
// subscription serves no entity type, a ledger no handler. Without that,
// a subscription uploaded under a ledger's name left its types to the
// built-in generic ledger, whose appends skip the business rules.
func (a *App) checkPluginFits(p *wasm.Plugin) error {
	d := p.Description()
	m := a.served.Load()
	if m == nil {
		return nil
	}
	errs := []error{a.checkHandlersKept(p, m)}
	if d.Kind != abi.KindLedger {
		for _, name := range m.domain.EntityTypeNames() {
			if m.domain.Entities[name].Ledger == d.Name {
				errs = append(errs, declaredAt(m.domain.Entities[name], fmt.Sprintf("the domain model gives entity type %s to ledger %s, and this version is a %s plugin, which serves no entity type; "+
					"change the domain manifest first", name, d.Name, d.Kind)))
			}
		}
		return errors.Join(errs...)
	}
	if len(d.EntityTypes) > 0 { // none: it serves every type
		for _, name := range m.domain.EntityTypeNames() {
			if m.domain.Entities[name].Ledger == d.Name && !slices.Contains(d.EntityTypes, name) {
				errs = append(errs, declaredAt(m.domain.Entities[name], fmt.Sprintf("the domain model gives entity type %s to ledger %s, and this version serves only %s; "+
					"change the domain manifest first", name, d.Name, strings.Join(d.EntityTypes, ", "))))
			}
		}
	}
	if m.routes != nil {
		commands := func(ledger string) ([]manifest.LedgerCommand, bool) {
			if ledger != d.Name {
				return nil, false
			}
			out := make([]manifest.LedgerCommand, len(d.Commands))
			for i, c := range d.Commands {
				out[i] = manifest.LedgerCommand{Name: c.Name, Method: c.Method, ReadOnly: c.ReadOnly}
			}
			return out, true
		}
		if err := manifest.CheckCommands(m.routes, m.domain, commands); err != nil {
			for _, diag := range manifest.Diagnostics("", err) {
				errs = append(errs, located(diag))
			}
		}
	}
	return errors.Join(errs...)
}

// declaredAt is msg as a problem at t's declaration (file:line:col, or
// the stored manifest's name), so that a refusal at start or on upload
// says which manifest to change.
func declaredAt(t *manifest.EntityType, msg string) error { return located(t.At(msg)) }

// located is d as an error, its place first when it has one.
func located(d manifest.Diagnostic) error {
	if d.File == "" && d.Line == 0 {
		return errors.New(d.Message)
	}
	return errors.New(d.String())
}

// checkHandlersKept refuses a plugin version that drops a handler the
// served model's subscriptions name and the version being replaced
// serves (a ledger version serves none): those subscriptions would stall,
// retrying on every process, until a rollback.
func (a *App) checkHandlersKept(p *wasm.Plugin, m *servedModel) error {
	d := p.Description()
	cur, ok := a.Plugins.Registry().Get(d.Name)
	if !ok {
		return nil
	}
	var handlers []string
	if d.Kind == abi.KindSubscription {
		handlers = d.Handlers
	}
	serves := "it serves " + strings.Join(handlers, ", ")
	if len(handlers) == 0 {
		serves = "it is a " + d.Kind + " plugin, which serves no handler"
	}
	var errs []error
	for _, s := range m.domain.Subscriptions {
		if slices.Contains(cur.Description().Handlers, s.Handler) && !slices.Contains(handlers, s.Handler) {
			errs = append(errs, fmt.Errorf("subscription %s needs handler %s, which this version does not serve (%s); change the domain manifest first",
				s.Name, s.Handler, serves))
		}
	}
	return errors.Join(errs...)
}
