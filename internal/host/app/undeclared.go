package app

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// warnOfUndeclaredTypes logs, once at start, the types of stored entities
// that no domain manifest served here declares: a restart without one of
// the --domain files drops its types, which the admin API's removal would
// have refused while entities of them exist. Requests on such entities
// answer the contract's unknown entity type; their facts stay readable.
// The count reads every entity row, so it runs beside serving, bounded.
func (a *App) warnOfUndeclaredTypes(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	counts, err := a.Store.EntityTypeCounts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.cfg.Logger.Warn("count stored entities by type", "err", err)
		}
		return
	}
	declared := a.Platform.Domain().Entities
	var undeclared []string
	for typ, n := range counts {
		if _, ok := declared[typ]; !ok {
			undeclared = append(undeclared, fmt.Sprintf("%s (%d entities)", typ, n))
		}
	}
	// A stored manifest this process has not read yet may declare them.
	if len(undeclared) == 0 || a.modelBehind() {
		return
	}
	slices.Sort(undeclared)
	a.cfg.Logger.Warn("stored entities have types no domain manifest declares: requests naming the types, and writes to the entities, answer 400 "+
		"(unknown entity type) until a manifest declares them again (the --domain file that did, or PUT /v1/admin/domain/<name>); their facts stay readable",
		"types", undeclared)
}
