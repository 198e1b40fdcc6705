package projection

import (
	"context"
	"errors"
	"fmt"
)

// CachedState is the cached-state manager: where materialized projections
// live. NewRedisState and NewMemoryState are its implementations; its
// atomicity guarantees come from them, so it has no others.
//
// Every key a state writes starts with its prefix (see WithPrefix), then
// the projection key, so that tenants and projections never collide.
type CachedState interface {
	// StorageVersion returns the storage format of a projection's cached
	// state: 1 (one blob), 2 (one entry per bucket), or 0 when nothing is
	// stored.
	StorageVersion(ctx context.Context, projectionKey string) (int, error)
	// Keys lists the storage keys that hold a projection's buckets in its
	// current format.
	Keys(ctx context.Context, projectionKey string) ([]string, error)
	// Delete removes a projection's cached state in every format, with its
	// record of processed fact ids.
	Delete(ctx context.Context, projectionKey string) error

	backend
}

// backend is the contract between the engine and a state. Every method
// works on one projection key.
type backend interface {
	// id identifies the state and its prefix (engine caches key on it).
	id() string
	// meta reads the stored format, fingerprint and watermarks.
	meta(ctx context.Context, key string, s *schema) (stateMeta, error)
	// apply records each new fact id and adds the fact to every bucket it
	// touches, one fact atomically at a time, and moves factsThroughId to
	// at least maxID. It returns the number of facts that were new. It
	// fails with errVersion when the stored format is not version,
	// errBusy while a migration holds the projection, and ErrStateBehind,
	// writing nothing, when atLeast is set and the stored factsThroughId
	// is below it (checked atomically with the writes).
	apply(ctx context.Context, key string, s *schema, version int, deltas []*factDelta, maxID, atLeast string) (int, error)
	// rollup seals coarser windows up to now and applies retention.
	rollup(ctx context.Context, key string, s *schema, version int, now int64) (rollupStats, error)
	// load reads the buckets of the plan computed from the stored meta.
	load(ctx context.Context, key string, s *schema, version int, plan func(stateMeta) []planRange, aggregate bool, f *groupFilter) (*loaded, stateMeta, error)
	// migrate rewrites the state from one format to the other. The
	// original stays readable until the switch, which is atomic; on error
	// the new copy is removed. It returns the number of buckets copied,
	// errBusy when another process holds the migration lock, and
	// errNoMigration when the stored version is no longer from.
	migrate(ctx context.Context, key string, s *schema, from, to int, hooks migrateHooks) (int, error)
}

// stateMeta is what a state records besides buckets.
type stateMeta struct {
	version     int // 0: nothing stored
	fingerprint string
	wm, del     []int64
	through     string
}

func emptyMeta(s *schema) stateMeta {
	m := stateMeta{}
	for range s.levels {
		m.wm = append(m.wm, noTime)
		m.del = append(m.del, noTime)
	}
	return m
}

// errVersion: the stored format differs from the one the engine expects.
type errVersion struct{ stored int }

func (e *errVersion) Error() string {
	return fmt.Sprintf("projection: cached state has storage version %d", e.stored)
}

var errBusy = errors.New("projection: cached state is locked by a migration")

func checkFingerprint(s *schema, stored string) error {
	if stored != "" && stored != s.fingerprint {
		return fmt.Errorf("%w (stored %s, this configuration %s)", ErrConfigChanged, stored, s.fingerprint)
	}
	return nil
}
