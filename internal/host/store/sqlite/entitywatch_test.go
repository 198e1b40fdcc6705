package sqlite_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/entitycache"
	"github.com/factline/factline/internal/host/store/sqlite"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// waitLimit bounds every wait for a watch to hear of a change.
const waitLimit = 30 * time.Second

func openAt(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// settled waits until the watches of s have completed two looks at the
// file after this call: the second began after every write that returned
// before it, and its outcome has been told.
func settled(t *testing.T, s *sqlite.Store) {
	t.Helper()
	from := s.WatchLooks()
	testutil.Eventually(t, waitLimit, "two looks at the data version", func() bool { return s.WatchLooks() >= from+2 })
}

func createEntity(t *testing.T, s store.Store, id string) {
	t.Helper()
	e := &store.Entity{TenantID: "tnt", ID: id, Type: "account", Data: json.RawMessage(`{}`), CreatedAt: 1, UpdatedAt: 1}
	if err := s.CreateEntity(t.Context(), e); err != nil {
		t.Fatalf("CreateEntity %s: %v", id, err)
	}
}

func updateEntity(t *testing.T, s store.Store, id string, version int64) {
	t.Helper()
	if _, err := s.UpdateEntity(t.Context(), store.EntityUpdate{TenantID: "tnt", ID: id, ExpectedVersion: version,
		Data: json.RawMessage(`{"v":1}`), UpdatedAt: 2}); err != nil {
		t.Fatalf("UpdateEntity %s: %v", id, err)
	}
}

// TestEntityWatchOwnWrites: every kind of entity write through the
// watched Store (create, update, fact append, state snapshot) is reported
// as that entity's change, before the write returns, and none of them
// makes the watch resynchronise.
func TestEntityWatchOwnWrites(t *testing.T) {
	t.Parallel()
	s := openAt(t, teststore.SQLite(t))
	r := testutil.NewWatchRecorder(t)
	if err := s.WatchEntities(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	r.Next(t, "resync live")
	ctx := t.Context()

	createEntity(t, s, "e1")
	r.Next(t, "changed tnt/e1")
	updateEntity(t, s, "e1", 1)
	r.Next(t, "changed tnt/e1")
	res, err := s.AppendFacts(ctx, []store.Append{
		{Fact: store.Fact{ID: "f1", TenantID: "tnt", EntityID: "e1", Type: "deposit", Data: json.RawMessage(`{}`)}},
		{Fact: store.Fact{ID: "f2", TenantID: "tnt", EntityID: "e1", Type: "deposit", Data: json.RawMessage(`{}`)}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("AppendFacts: %v %v", err, res)
	}
	r.Next(t, "changed tnt/e1")
	if err := s.SetEntityState(ctx, "tnt", "e1", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	r.Next(t, "changed tnt/e1")

	settled(t, s)
	r.None(t, "writes through the watched store")
}

// TestEntityWatchOtherStore: a write through another Store on the same
// file (as another process, or the CLI, writes it) makes the watch
// resynchronise within a few looks; writes that touch no entity do too
// (which entities a commit touched is not known), and nothing is reported
// without a commit.
func TestEntityWatchOtherStore(t *testing.T) {
	t.Parallel()
	path := teststore.SQLite(t)
	a, b := openAt(t, path), openAt(t, path)
	r := testutil.NewWatchRecorder(t)
	if err := a.WatchEntities(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	r.Next(t, "resync live")
	settled(t, a)
	r.None(t, "no commit")

	createEntity(t, b, "e1")
	r.Next(t, "resync live")
	settled(t, a)
	r.None(t, "one resync")

	updateEntity(t, b, "e1", 1)
	r.Next(t, "resync live")

	if err := b.SetCheckpoint(t.Context(), "c", 1); err != nil {
		t.Fatal(err)
	}
	r.Next(t, "resync live")

	// Writes through both, interleaved: a's are reported by entity, b's
	// still found.
	settled(t, a)
	updateEntity(t, a, "e1", 2)
	r.Next(t, "changed tnt/e1")
	updateEntity(t, b, "e1", 3)
	r.Next(t, "resync live")
}

// TestEntityWatchEnds: a watch whose context ends, or whose Store closes,
// says Resync(false) and nothing more; a closed Store refuses new watches.
func TestEntityWatchEnds(t *testing.T) {
	t.Parallel()
	path := teststore.SQLite(t)
	s := openAt(t, path)

	ctx, cancel := context.WithCancel(t.Context())
	r1 := testutil.NewWatchRecorder(t)
	if err := s.WatchEntities(ctx, r1); err != nil {
		t.Fatal(err)
	}
	r1.Next(t, "resync live")
	cancel()
	r1.Next(t, "resync down")

	r2 := testutil.NewWatchRecorder(t)
	if err := s.WatchEntities(t.Context(), r2); err != nil {
		t.Fatal(err)
	}
	r2.Next(t, "resync live")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r2.Next(t, "resync down")
	createEntity(t, openAt(t, path), "e1")
	r1.None(t, "the end of the watch")
	r2.None(t, "the close of the store")

	if err := s.WatchEntities(t.Context(), testutil.NewWatchRecorder(t)); err == nil {
		t.Fatal("WatchEntities on a closed store succeeded")
	}
}

// writerEnv names the database file TestHelperProcessWriter updates when
// the test binary runs as a child of TestEntityCacheOtherProcess.
const writerEnv = "FACTLINE_SQLITE_TEST_WRITER"

// TestHelperProcessWriter is the other process of
// TestEntityCacheOtherProcess: it updates entity e1 of the file named by
// writerEnv from version 1 to 2. Run otherwise, it does nothing.
func TestHelperProcessWriter(t *testing.T) {
	path := os.Getenv(writerEnv)
	if path == "" {
		return
	}
	updateEntity(t, openAt(t, path), "e1", 1)
}

// TestEntityCacheOtherProcess: an entity cache fed by a Store serves
// repeated reads from memory, and an update by another process (this test
// binary run again) on the same file is read through it well before the
// cache's one-hour age limit.
func TestEntityCacheOtherProcess(t *testing.T) {
	t.Parallel()
	path := teststore.SQLite(t)
	s := openAt(t, path)
	createEntity(t, s, "e1")
	c := entitycache.New(entitycache.Options{MaxAge: time.Hour})
	if err := s.WatchEntities(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitLimit, "the cache to go live", c.Live)
	ctx := t.Context()
	read := func() int64 {
		e, err := c.Get(ctx, "tnt", "e1", func(ctx context.Context) (*store.Entity, error) { return s.GetEntity(ctx, "tnt", "e1") })
		if err != nil {
			t.Fatal(err)
		}
		return e.Version
	}
	before := c.Stats()
	for range 3 {
		if v := read(); v != 1 {
			t.Fatalf("version %d, want 1", v)
		}
	}
	if st := c.Stats(); st.Hits-before.Hits < 1 {
		t.Fatalf("three reads: %d hits, %d misses: the cache was not used", st.Hits-before.Hits, st.Misses-before.Misses)
	}

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), writerEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the writer process: %v\n%s", err, out)
	}
	start := time.Now()
	testutil.Eventually(t, waitLimit, "the other process's update to be read", func() bool { return read() == 2 })
	t.Logf("the other process's update read after %v", time.Since(start))
}
