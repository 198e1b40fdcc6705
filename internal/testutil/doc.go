// Package testutil starts real PostgreSQL and Redis servers for tests.
//
// Nothing here is a mock and nothing skips: a test that asks for a database
// gets one or fails with a message that says why. Each test binary starts at
// most one server of each kind, on first use, in a temporary directory on a
// free port of 127.0.0.1, and stops it when the tests end. A package that uses
// [Postgres] or [Redis] must route its TestMain through [Main]:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
//
// Every call of [Postgres] creates a fresh, empty database (CREATE DATABASE)
// that is dropped when the test ends; [PostgresFrom] creates it as a copy
// of a template prepared once per binary (a migrated schema, say). Every
// call of [Redis] gets a logical database of its own, flushed before and
// after use. Tests can therefore run in parallel against one server. The
// PostgreSQL server keeps its files in /dev/shm where the machine has it
// ([PostgresDurable]'s stays on disk): creating a database is then a copy
// in memory.
//
// [Main] also fails a binary whose tests pass but leave goroutines running
// (go.uber.org/goleak). Tests wait for background work with [Eventually]
// or [EventuallyNil], never with a sleep.
//
// Environment:
//
//   - FACTLINE_TEST_DATABASE_URL: use this PostgreSQL server instead of
//     starting one; databases are still created (and dropped) per call, so
//     the role needs CREATEDB.
//   - FACTLINE_TEST_REDIS_URL: use this Redis server instead of starting one.
//     Its logical databases 1..N-1 are leased per call across processes
//     (with keys in database 0) and FLUSHED: never point it at a Redis that
//     holds data you want to keep.
//
// When the binaries are missing and the process runs as root (as on the
// project's machines), they are installed with apt-get, serialised across
// concurrently running test binaries by a file lock; otherwise the test
// fails with a message naming the package to install. PostgreSQL refuses to
// run as root, so as root the cluster belongs to the postgres user and every
// PostgreSQL command runs through runuser.
//
// A test binary that dies without reaching the end of [Main] (a panic, a
// -timeout, SIGKILL) cannot stop its servers. Their directories record the
// owning process, and the next test binary that starts a server stops the
// servers of owners that are gone and removes their directories.
package testutil
