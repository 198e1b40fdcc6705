package platform

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// CommandOutcome is what a ledger command did: the facts it recorded, or,
// for a read-only command, its result.
type CommandOutcome struct {
	Entity *store.Entity
	Facts  []store.Fact
	Result json.RawMessage
}

// CheckStoredType returns the contract's bad request (Unknown entity
// type: <type>, naming the entity) when the domain no longer declares the
// type of the stored entity e.
func (s *Service) CheckStoredType(e *store.Entity) error {
	_, err := s.storedType(e)
	return err
}

// Commands lists the commands the ledger of an entity type serves beyond
// the raw append (nil when it serves none).
func (s *Service) Commands(entityType string) []ledger.CommandSpec {
	t, err := s.entityType(entityType)
	if err != nil {
		return nil
	}
	if c, ok := s.ledgerFor(t).(ledger.Commander); ok {
		return c.Commands()
	}
	return nil
}

// LedgerNotReady returns the problem to answer while the ledger of an
// entity type cannot serve yet (its plugin still loading), else nil.
// An undeclared type has no ledger to wait for (callers answer that).
func (s *Service) LedgerNotReady(entityType string) error {
	if t, err := s.entityType(entityType); err == nil {
		if l, ok := s.ledgerFor(t).(ledger.Loader); ok {
			return l.NotReady()
		}
	}
	return nil
}

// FindCommand resolves the command routed at method and path (below
// /v1/entities/:id) for an entity type.
func (s *Service) FindCommand(entityType, method, path string) (ledger.CommandSpec, bool) {
	for _, c := range s.Commands(entityType) {
		if c.Path != "" && c.Method == method && c.Path == path {
			return c, true
		}
	}
	return ledger.CommandSpec{}, false
}

// CommandNamed resolves a command of an entity type's ledger by name (a
// manifest route of action command names it).
func (s *Service) CommandNamed(entityType, name string) (ledger.CommandSpec, bool) {
	for _, c := range s.Commands(entityType) {
		if c.Name == name && c.Name != ledger.CommandAppend {
			return c, true
		}
	}
	return ledger.CommandSpec{}, false
}

// RunCommand runs a ledger command against an entity of the tenant: the
// ledger decides on the entity's current state; facts it decides are
// recorded with the new state in one transaction.
func (s *Service) RunCommand(ctx context.Context, tenant, entityID, command string, input json.RawMessage, prov Provenance) (*CommandOutcome, error) {
	e, mark, err := s.loadForWrite(ctx, tenant, entityID)
	if err != nil {
		return nil, err
	}
	return s.runCommand(ctx, tenant, e, mark, command, input, prov)
}

// RunCommandOn is RunCommand on a copy of the entity the caller has just
// read (to find its type and command), so that the command need not read
// it again. A copy that turns out stale costs a retry, never a wrong
// decision: the facts are pinned to the version the ledger decided on.
func (s *Service) RunCommandOn(ctx context.Context, tenant string, e *store.Entity, command string, input json.RawMessage, prov Provenance) (*CommandOutcome, error) {
	return s.runCommand(ctx, tenant, e, s.locks.mark(tenant, e.ID), command, input, prov)
}

func (s *Service) runCommand(ctx context.Context, tenant string, e *store.Entity, mark readMark, command string, input json.RawMessage, prov Provenance) (*CommandOutcome, error) {
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	facts, result, err := s.execute(ctx, tenant, e, mark, ledger.Command{Name: command, Input: input}, prov, 0)
	if err != nil {
		return nil, err
	}
	return &CommandOutcome{Entity: e, Facts: facts, Result: result}, nil
}

// RebuildResult reports a snapshot rebuild.
type RebuildResult struct {
	Entities int `json:"entities"`
	Facts    int `json:"facts"`
	Changed  int `json:"changed"`
}

// RebuildSnapshots re-derives the cached state of every entity of a type in
// the tenant by replaying its facts through the ledger's evolve (for
// example after a plugin upgrade changed evolve). Writers to an entity in
// this process wait while it is rebuilt.
func (s *Service) RebuildSnapshots(ctx context.Context, tenant, entityType string) (*RebuildResult, error) {
	t, err := s.entityType(entityType)
	if err != nil {
		return nil, err
	}
	l := s.ledgerFor(t)
	res := &RebuildResult{}
	after := ""
	for {
		page, err := s.store.ListEntities(ctx, store.EntityFilter{TenantID: tenant, Type: t.Name, AfterID: after, Limit: 200})
		if err != nil {
			return nil, storeErr("rebuild: list entities", err)
		}
		for i := range page {
			changed, n, err := s.rebuildOne(ctx, tenant, &page[i], l)
			if err != nil {
				return nil, err
			}
			res.Entities++
			res.Facts += n
			if changed {
				res.Changed++
			}
		}
		if len(page) < 200 {
			return res, nil
		}
		after = page[len(page)-1].ID
	}
}

func (s *Service) rebuildOne(ctx context.Context, tenant string, e *store.Entity, l ledger.Ledger) (bool, int, error) {
	unlock := s.locks.lock(tenant, e.ID)
	defer unlock()
	var state json.RawMessage
	n := 0
	var afterSeq int64
	for {
		facts, err := s.store.ListEntityFacts(ctx, tenant, e.ID, afterSeq, 500)
		if err != nil {
			return false, n, storeErr("rebuild: list facts", err)
		}
		for i := range facts {
			next, err := l.Evolve(ctx, state, mustJSON(NewFactView(&facts[i])))
			if err != nil {
				return false, n, problem.Wrap(problem.Internal, fmt.Sprintf("Replaying fact %s of entity %s failed", facts[i].ID, e.ID), err)
			}
			state = next
			n++
			afterSeq = facts[i].Seq
		}
		if len(facts) < 500 {
			break
		}
	}
	if !l.StateDependent() && state == nil {
		state = e.State
	}
	if jsonEqual(state, e.State) {
		return false, n, nil
	}
	if err := store.CheckJSON("state", state); err != nil {
		return false, n, ledgerFault(l.Name(), fmt.Sprintf("evolved entity %s to a state whose %v", e.ID, err))
	}
	err := s.store.SetEntityState(ctx, tenant, e.ID, state)
	s.changed(tenant, e.ID)
	if err != nil {
		return false, n, storeErr("rebuild: set state", err)
	}
	return true, n, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}
