package store

import "context"

// EntityWatcher is told about entity changes committed by any process
// sharing a database. Calls come from the store's listener goroutines, one
// at a time per watch, and must return quickly (no store calls).
type EntityWatcher interface {
	// EntityChanged reports that the entity's row changed (an update, a
	// state snapshot, an appended fact). It may be called for a change the
	// watcher made itself, more than once for one change, and for changes
	// that wrote nothing; it is never left out for a committed change while
	// the watch is live.
	EntityChanged(tenantID, id string)
	// Resync reports that changes may have gone unreported: forget
	// everything known about entities. live reports whether changes are
	// announced from now on; while the last Resync said false (and before
	// the first Resync), changes are not announced at all.
	Resync(live bool)
	// Empty reports whether the watcher holds nothing a change could make
	// stale. A feed may then answer changes with Resync(true) instead of
	// finding out which entities they touched.
	Empty() bool
}

// EntityFeed is implemented by stores that announce entity changes made by
// every process sharing the database: internal/host/store/postgres through
// LISTEN/NOTIFY, internal/host/store/sqlite by its own write path and a
// poll of the file's data version.
type EntityFeed interface {
	// WatchEntities reports entity changes to w until ctx ends. It returns
	// at once; the first call to w is Resync(true) once changes are
	// announced (after the store's listener connection is up), and
	// connection failures are reported as Resync(false). It fails only when
	// the store is closed.
	WatchEntities(ctx context.Context, w EntityWatcher) error
}
