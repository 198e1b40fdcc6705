// Package projector runs projections inside the product: it turns platform
// configs of type "projection" into running engines (internal/host/projection), feeds
// them from the durable fact stream and answers the gateway's query action.
//
// Each config version is compiled into a runtime with a state key of the
// form <tenant>:<config id>:<fingerprint>, where the fingerprint hashes
// everything in the settings that decides how facts aggregate (everything
// but storageVersion). A runtime owns one stream consumer, named
// "projection:" + state key, whose checkpoint starts at 0: a new projection
// backfills from every fact recorded before it existed, at the stream's
// pace and without holding up writers. Delivery is at least once; the
// engine records fact ids, so a replayed batch changes nothing and results
// are exactly once. Once a runtime has read everything there was, it joins
// the service's shared reader (a stream.Group), which reads each new batch
// once for every caught-up runtime and saves their checkpoints; a runtime
// the group drops after a failure reads on its own again. A runtime
// marks its state key (Marker) where the state lives before writing any;
// at start, a checkpoint past 0 with neither mark nor state means the
// state was lost (a flushed Redis, a restored database) and the runtime
// rebuilds from position 0.
//
// A new version that aggregates differently gets a new state key and
// backfills beside the old one, which keeps answering queries until the new
// one has caught up with the stream head it saw at its start; then the old
// runtime stops and its cached state and checkpoint are deleted. A version
// that changes only storageVersion keeps the key: the engine migrates the
// cached state in place (emitting the projection.migration_* facts).
//
// Queries resolve a projection by config id or by name within the caller's
// tenant; materialized and verify queries read the cached state of the
// serving runtime, compute queries read the tenant's facts from the store.
package projector
