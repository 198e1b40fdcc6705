// Package postgres implements [store.Store] on PostgreSQL with pgx v5 and a
// pgxpool connection pool. It is the store for deployments that run more
// than one Factline process against one database.
//
// Design:
//
//   - The schema is versioned: the embedded migrations/NNNN_name.sql files
//     are applied at [Open], each in its own transaction that first takes a
//     transaction-level advisory lock, and recorded in schema_migrations, so
//     processes starting together do not race.
//   - Fact positions come from the single-row table fact_head. An
//     AppendFacts transaction locks that row first and holds the lock until
//     it commits, so appends from every process are serialised there:
//     positions are gapless and commit order is position order.
//   - AppendFacts costs two round trips plus BEGIN and COMMIT, whatever the
//     batch size: one pipelined batch locks the head, locks the entity rows
//     and looks up the fact ids; store.DecideAppends then decides the
//     items (every row they depend on is locked, so the decisions cannot
//     go stale); one more batch writes all entity updates, all facts (one
//     INSERT over unnest), the new head and a NOTIFY. A failing item simply
//     is not written; no savepoints are needed.
//   - SubscribeFacts listens on the channel factline_facts over a dedicated
//     connection that reconnects on failure, so a commit in any process
//     wakes the subscribers of every process; commits made by this Store
//     also wake its subscribers directly.
//   - WatchEntities reports entity changes of every process to a watcher
//     (the platform's entity read cache): UpdateEntity, SetEntityState and
//     AppendFacts NOTIFY factline_entities with each changed entity's key
//     in the transaction that writes, and fact appends are also read back
//     from the facts table after their factline_facts notification (which
//     covers appends by processes that name no entity). While the listener connection is
//     down the watcher is told it cannot rely on the feed.
//   - The webhook outbox rides on the same machinery: an Append's outbox row
//     is inserted in AppendFacts' second round trip, so it commits with its
//     webhook.triggered fact; ClaimOutbox, once a cheap statement has
//     found a due row, leases due rows with FOR UPDATE SKIP LOCKED
//     (concurrent claims from any process skip rows another holds, never
//     wait for them); ChangeOutbox follows AppendFacts'
//     pattern (lock the head and the rows, decide in Go, write in one more
//     round trip), so an attempt's outcome and its audit fact commit
//     together. Lock order is always head, then outbox rows.
//   - Driver errors are mapped to the store's sentinel errors in one place,
//     interpretError.
package postgres
