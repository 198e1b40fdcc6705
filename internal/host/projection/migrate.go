package projection

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Fact types the engine emits about itself (PROJECTION_FACT_TYPES).
const (
	// MigrationStarted: a storage migration begins. Data: projection_key,
	// from_version, to_version, config_version (when versioned).
	MigrationStarted = "projection.migration_started"
	// MigrationCompleted: the new format is active. Data adds duration_ms
	// and bucket_count (buckets copied, every level counted).
	MigrationCompleted = "projection.migration_completed"
	// MigrationFailed: the migration stopped; the original format stays
	// active and intact. Data adds duration_ms and error.
	MigrationFailed = "projection.migration_failed"
)

// FactTypes returns the fact types the engine emits.
func FactTypes() []string {
	return []string{MigrationStarted, MigrationCompleted, MigrationFailed}
}

// FactEmitter receives the facts the engine emits. The engine leaves
// Fact.ID empty for the emitter to assign. An emitter error is logged and
// does not stop a migration.
type FactEmitter interface {
	Emit(ctx context.Context, f Fact) error
}

// FactEmitterFunc adapts a function to FactEmitter.
type FactEmitterFunc func(ctx context.Context, f Fact) error

// Emit implements FactEmitter.
func (fn FactEmitterFunc) Emit(ctx context.Context, f Fact) error { return fn(ctx, f) }

// Migrate moves the cached state of a projection to the configured
// storageVersion now (processing and querying do it on first use), and
// returns the error of a migration that fails (ErrMigration). After a
// failure, processing and querying use the stored format and try the
// migration again after 30 seconds, then after twice as long each time up
// to 30 minutes; Migrate tries at once.
func (e *Engine) Migrate(ctx context.Context, projectionKey string, st CachedState) error {
	if st == nil {
		st = e.opts.State
	}
	if st == nil || projectionKey == "" {
		return ErrNoState
	}
	ck := e.cacheKey(st, projectionKey)
	if r, ok := e.failedMigrations.Load(ck); ok {
		// Try now, keeping the wait that doubles.
		old := r.(*migrationRetry)
		e.failedMigrations.Store(ck, &migrationRetry{wait: old.wait, err: old.err})
	}
	if err := e.withFormat(ctx, st, projectionKey, func(int) error { return nil }); err != nil {
		return err
	}
	if r, ok := e.failedMigrations.Load(ck); ok {
		return r.(*migrationRetry).err
	}
	return nil
}

func (e *Engine) emit(ctx context.Context, typ string, data map[string]any) {
	if e.opts.Emitter == nil {
		return
	}
	f := Fact{Type: typ, Timestamp: e.opts.Now().UnixMilli(), Data: data}
	if err := e.opts.Emitter.Emit(context.WithoutCancel(ctx), f); err != nil {
		e.opts.Logger.Warn("projection: emit fact", "type", typ, "err", err)
	}
}

// migrateHooks are called by a state's migrate: started once it holds the
// projection's migration lock and has checked that the migration is still
// needed, step between steps (tests inject faults there).
type migrateHooks struct {
	started func()
	step    func(step int) error
}

// errNoMigration: another process already migrated the state.
var errNoMigration = errors.New("projection: nothing to migrate")

// migrate runs one migration with its facts.
func (e *Engine) migrate(ctx context.Context, st CachedState, key string, from, to int) error {
	data := func() map[string]any {
		d := map[string]any{"projection_key": key, "from_version": int64(from), "to_version": int64(to)}
		if e.version > 0 {
			d["config_version"] = int64(e.version)
		}
		return d
	}
	var start time.Time
	started := false
	hooks := migrateHooks{
		started: func() {
			started = true
			start = time.Now()
			e.emit(ctx, MigrationStarted, data())
		},
		step: e.faults,
	}
	n, err := st.migrate(ctx, key, e.s, from, to, hooks)
	if !started {
		if err == nil || errors.Is(err, errNoMigration) {
			return nil
		}
		return err // errBusy: another process is migrating; the caller waits
	}
	d := data()
	d["duration_ms"] = time.Since(start).Milliseconds()
	if err != nil {
		d["error"] = err.Error()
		e.emit(ctx, MigrationFailed, d)
		return fmt.Errorf("%w: %q from version %d to %d: %w", ErrMigration, key, from, to, err)
	}
	d["bucket_count"] = int64(n)
	e.emit(ctx, MigrationCompleted, d)
	return nil
}
