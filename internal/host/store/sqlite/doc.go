// Package sqlite implements [store.Store] on an embedded SQLite database
// (modernc.org/sqlite, pure Go, no cgo). It is Factline's default store for
// single-node deployments and development.
//
// Design:
//
//   - One writer at a time. Writes go through a dedicated connection pool
//     holding a single connection and start with BEGIN IMMEDIATE, so the
//     write lock is taken up front and transactions never upgrade a read
//     lock. Reads use a separate pool of query-only connections; in WAL
//     mode they see the last committed state without blocking the writer.
//   - Gapless fact positions in commit order follow from the single writer:
//     an AppendFacts transaction reads the position counter (a one-row
//     table), the entities and the taken fact ids, lets store.DecideAppends
//     decide the items, writes only the successful ones and moves the
//     counter by their number; a failed transaction rolls it all back.
//   - The schema is versioned: the embedded migrations/NNNN_name.sql files
//     are applied at [Open], each in its own transaction, and recorded in
//     schema_migrations.
//   - SubscribeFacts is served by an in-process broadcast sent after every
//     commit that wrote facts; other processes sharing the file are not
//     notified (use the Postgres store for that).
//   - WatchEntities (the entity cache's feed) reports entities written
//     through this Store as they commit, and finds commits by any other
//     connection to the file (another process, another Store) by polling
//     PRAGMA data_version on the writer connection every 50 ms: the
//     watcher then starts over (Resync).
//
// Connections run with journal_mode=WAL, busy_timeout, foreign_keys=ON and
// SQLite's default synchronous=FULL: facts are the system of record, so a
// commit is durable before AppendFacts returns.
package sqlite
