package entitycache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/entitycache"
)

// db is a fake database of entity versions that counts its reads.
type db struct {
	mu       sync.Mutex
	versions map[string]int64
	reads    atomic.Int64
}

func newDB() *db { return &db{versions: map[string]int64{}} }

func (d *db) set(id string, v int64) {
	d.mu.Lock()
	d.versions[id] = v
	d.mu.Unlock()
}

func (d *db) loader(id string) func(context.Context) (*store.Entity, error) {
	return func(context.Context) (*store.Entity, error) {
		d.reads.Add(1)
		d.mu.Lock()
		v, ok := d.versions[id]
		d.mu.Unlock()
		if !ok {
			return nil, store.ErrNotFound
		}
		return &store.Entity{TenantID: "t", ID: id, Type: "account", Version: v, Data: json.RawMessage(`{"v":1}`)}, nil
	}
}

// clock is a test clock that moves only when told to.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func setup(t *testing.T, opts entitycache.Options) (*entitycache.Cache, *db, *clock) {
	t.Helper()
	clk := &clock{t: time.Unix(1_750_000_000, 0)}
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	return entitycache.New(opts), newDB(), clk
}

// get reads id and checks its version.
func get(t *testing.T, c *entitycache.Cache, d *db, id string, want int64) {
	t.Helper()
	e, err := c.Get(t.Context(), "t", id, d.loader(id))
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	if e.Version != want {
		t.Fatalf("Get %s: version %d, want %d", id, e.Version, want)
	}
}

// reads checks how many times the database was read so far.
func reads(t *testing.T, d *db, want int64) {
	t.Helper()
	if got := d.reads.Load(); got != want {
		t.Fatalf("%d database reads, want %d", got, want)
	}
}

func TestServesOnlyWhileLive(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{})
	d.set("a", 1)
	// Before the feed is up, every read goes to the database.
	for range 3 {
		get(t, c, d, "a", 1)
	}
	reads(t, d, 3)
	if c.Live() {
		t.Fatal("a new cache is live")
	}

	c.Resync(true)
	get(t, c, d, "a", 1)
	get(t, c, d, "a", 1)
	reads(t, d, 4)

	// The feed goes down: nothing is served, nothing is cached, and what
	// changes meanwhile is read.
	c.Resync(false)
	d.set("a", 2)
	get(t, c, d, "a", 2)
	get(t, c, d, "a", 2)
	reads(t, d, 6)
	if st := c.Stats(); st.Entries != 0 {
		t.Fatalf("%d entries while down, want 0", st.Entries)
	}

	// Up again: a fresh start.
	c.Resync(true)
	get(t, c, d, "a", 2)
	get(t, c, d, "a", 2)
	reads(t, d, 7)
	if st := c.Stats(); st.Hits != 2 || st.Misses != 7 {
		t.Fatalf("stats %+v, want 2 hits and 7 misses", st)
	}
}

func TestInvalidate(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{})
	c.Resync(true)
	d.set("a", 1)
	d.set("b", 1)
	get(t, c, d, "a", 1)
	get(t, c, d, "b", 1)
	d.set("a", 2)
	c.Invalidate("t", "a")
	get(t, c, d, "a", 2)
	get(t, c, d, "b", 1) // untouched
	reads(t, d, 3)
	// EntityChanged is the feed's Invalidate.
	d.set("b", 2)
	c.EntityChanged("t", "b")
	get(t, c, d, "b", 2)
	reads(t, d, 4)
	// Another tenant's entity of the same id is another entity.
	c.Invalidate("u", "a")
	get(t, c, d, "a", 2)
	reads(t, d, 4)
}

// TestLoadRacingChange: a change reported while a read is loading may be
// newer than what the read loaded, so that is not cached.
func TestLoadRacingChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(c *entitycache.Cache)
	}{
		{"invalidate", func(c *entitycache.Cache) { c.Invalidate("t", "a") }},
		{"another key of the shard", func(c *entitycache.Cache) {
			// Every key shares a shard with one of these.
			for i := range 1000 {
				c.Invalidate("t", fmt.Sprint("other-", i))
			}
		}},
		{"resync", func(c *entitycache.Cache) { c.Resync(true) }},
		{"feed down", func(c *entitycache.Cache) { c.Resync(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, d, _ := setup(t, entitycache.Options{})
			c.Resync(true)
			d.set("a", 1)
			load := d.loader("a")
			e, err := c.Get(t.Context(), "t", "a", func(ctx context.Context) (*store.Entity, error) {
				e, err := load(ctx)
				// The change commits after the read, and is reported
				// before the load returns.
				d.set("a", 2)
				tc.change(c)
				return e, err
			})
			if err != nil || e.Version != 1 {
				t.Fatalf("Get = %+v, %v; want version 1 (what was loaded)", e, err)
			}
			if tc.name == "feed down" {
				c.Resync(true)
			}
			get(t, c, d, "a", 2)
			reads(t, d, 2)
		})
	}
}

func TestMaxAge(t *testing.T) {
	t.Parallel()
	c, d, clk := setup(t, entitycache.Options{MaxAge: time.Second})
	c.Resync(true)
	d.set("a", 1)
	get(t, c, d, "a", 1)
	d.set("a", 2) // unreported
	clk.Advance(999 * time.Millisecond)
	get(t, c, d, "a", 1)
	reads(t, d, 1)
	clk.Advance(time.Millisecond)
	get(t, c, d, "a", 2)
	reads(t, d, 2)
}

func TestErrorsAreNotCached(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{})
	c.Resync(true)
	for range 2 {
		if _, err := c.Get(t.Context(), "t", "a", d.loader("a")); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get of a missing entity: %v", err)
		}
	}
	reads(t, d, 2)
	d.set("a", 1)
	get(t, c, d, "a", 1)
}

// TestCopies: what Get returns is the caller's; changing it changes neither
// the cache nor other readers.
func TestCopies(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{})
	c.Resync(true)
	d.set("a", 1)
	e, _ := c.Get(t.Context(), "t", "a", d.loader("a"))
	e.Version = 99
	e2, _ := c.Get(t.Context(), "t", "a", d.loader("a"))
	e2.Type = "other"
	get(t, c, d, "a", 1)
	e3, _ := c.Get(t.Context(), "t", "a", d.loader("a"))
	if e3.Type != "account" {
		t.Fatalf("type %q, want account", e3.Type)
	}
	reads(t, d, 1)
}

// TestKeysAreCopied: a caller's key strings may alias memory it reuses
// (fiber's are); the cache keeps its own.
func TestKeysAreCopied(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{})
	c.Resync(true)
	d.set("a", 1)
	buf := []byte("a")
	id := unsafeString(buf)
	get(t, c, d, id, 1)
	buf[0] = 'b'
	d.set("b", 7)
	get(t, c, d, "b", 7)
	get(t, c, d, "a", 1)
	reads(t, d, 2)
}

func TestBounds(t *testing.T) {
	t.Parallel()
	t.Run("entries", func(t *testing.T) {
		t.Parallel()
		c, d, _ := setup(t, entitycache.Options{MaxEntries: 128})
		c.Resync(true)
		for i := range 5000 {
			id := fmt.Sprint("e", i)
			d.set(id, 1)
			get(t, c, d, id, 1)
		}
		if st := c.Stats(); st.Entries > 128 || st.Entries < 64 {
			t.Fatalf("%d entries, want at most 128 (and not far fewer)", st.Entries)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		c, _, _ := setup(t, entitycache.Options{MaxBytes: 64 * 4096})
		c.Resync(true)
		big := func(id string, n int) func(context.Context) (*store.Entity, error) {
			return func(context.Context) (*store.Entity, error) {
				return &store.Entity{TenantID: "t", ID: id, Version: 1, Data: json.RawMessage(`"` + strings.Repeat("x", n) + `"`)}, nil
			}
		}
		// Larger than a shard's share: never cached.
		for range 2 {
			if _, err := c.Get(t.Context(), "t", "huge", big("huge", 8192)); err != nil {
				t.Fatal(err)
			}
		}
		if st := c.Stats(); st.Entries != 0 || st.Misses != 2 {
			t.Fatalf("stats %+v, want the huge entity uncached", st)
		}
		for i := range 2000 {
			id := fmt.Sprint("e", i)
			if _, err := c.Get(t.Context(), "t", id, big(id, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		if st := c.Stats(); st.Bytes > 64*4096 || st.Entries == 0 {
			t.Fatalf("stats %+v, want at most %d bytes", st, 64*4096)
		}
	})
}

// TestReadYourWrites hammers one entity with writers (each: commit a new
// version, then Invalidate, as the platform does) and readers. A read that
// starts after a write has returned must see that write or a later one,
// whatever the interleaving of loads, fills and invalidations.
func TestReadYourWrites(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{})
	c.Resync(true)
	d.set("a", 1)
	var (
		done      atomic.Bool
		committed atomic.Int64 // the last version whose write has returned
		wg        sync.WaitGroup
	)
	committed.Store(1)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				d.mu.Lock()
				v := d.versions["a"] + 1
				d.versions["a"] = v
				d.mu.Unlock()
				c.Invalidate("t", "a")
				for {
					cur := committed.Load()
					if cur >= v || committed.CompareAndSwap(cur, v) {
						break
					}
				}
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	var readers sync.WaitGroup
	load := d.loader("a")
	slowLoad := func(ctx context.Context) (*store.Entity, error) {
		e, err := load(ctx)
		runtime.Gosched() // widen the window between the read and the fill
		return e, err
	}
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !done.Load() {
				floor := committed.Load()
				e, err := c.Get(context.Background(), "t", "a", slowLoad)
				if err != nil {
					t.Error(err)
					return
				}
				if e.Version < floor {
					t.Errorf("read version %d after version %d was written", e.Version, floor)
					return
				}
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()
	get(t, c, d, "a", 4001)
}

// unsafeString is a string sharing b's memory, as fiber's values do.
func unsafeString(b []byte) string { return unsafe.String(&b[0], len(b)) }

func TestEmpty(t *testing.T) {
	t.Parallel()
	c, d, clk := setup(t, entitycache.Options{MaxEntries: 64, MaxAge: time.Second})
	c.Resync(true)
	if !c.Empty() {
		t.Fatal("a new cache is not empty")
	}
	d.set("a", 1)
	d.set("b", 1)
	get(t, c, d, "a", 1)
	get(t, c, d, "b", 1)
	if c.Empty() {
		t.Fatal("empty after two reads")
	}
	c.Invalidate("t", "a")
	if c.Empty() {
		t.Fatal("empty with b still cached")
	}
	c.Invalidate("t", "b")
	if !c.Empty() {
		t.Fatal("not empty after both were invalidated")
	}
	get(t, c, d, "a", 1)
	c.Resync(true)
	if !c.Empty() {
		t.Fatal("not empty after a resync")
	}
	// Expired entries are dropped when read, and evicted when room is
	// needed; every way out is counted.
	for i := range 200 {
		id := fmt.Sprint("e", i)
		d.set(id, 1)
		get(t, c, d, id, 1)
	}
	clk.Advance(time.Second)
	for i := range 200 {
		id := fmt.Sprint("e", i)
		get(t, c, d, id, 1)
		c.Invalidate("t", id)
	}
	if st := c.Stats(); !c.Empty() || st.Entries != 0 {
		t.Fatalf("Empty %v with %d entries", c.Empty(), st.Entries)
	}
}

// TestEvictsOldestFirst: a full cache makes room by dropping the entities
// it has held longest, so the most recent reads stay cached.
func TestEvictsOldestFirst(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{MaxEntries: 64 * 16})
	c.Resync(true)
	const n, recent = 5000, 128
	for i := range n {
		id := fmt.Sprint("e", i)
		d.set(id, 1)
		get(t, c, d, id, 1)
	}
	before := d.reads.Load()
	for i := n - recent; i < n; i++ {
		get(t, c, d, fmt.Sprint("e", i), 1)
	}
	if got := d.reads.Load() - before; got != 0 {
		t.Fatalf("%d of the %d most recent entities were evicted, want none", got, recent)
	}
}

// TestDefaultHoldsManyEntities: by default the cache holds 100,000 small
// entities (a uniform read of that many then mostly hits).
func TestDefaultHoldsManyEntities(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{})
	c.Resync(true)
	for i := range 100_000 {
		id := fmt.Sprint("e", i)
		d.set(id, 1)
		get(t, c, d, id, 1)
	}
	if st := c.Stats(); st.Entries < 90_000 {
		t.Fatalf("%d entries cached of 100,000, want at least 90,000", st.Entries)
	}
}

// TestOrderStaysBounded: entities invalidated and read again, over and
// over, leave the cache's bookkeeping no larger than a few times its
// entries.
func TestOrderStaysBounded(t *testing.T) {
	t.Parallel()
	c, d, _ := setup(t, entitycache.Options{MaxEntries: 64 * 16})
	c.Resync(true)
	for i := range 200_000 {
		id := fmt.Sprint("e", i%100)
		d.set(id, 1)
		get(t, c, d, id, 1)
		c.Invalidate("t", id)
	}
	if n, entries := entitycache.QueueLen(c), c.Stats().Entries; n > 2*entries+64*64 {
		t.Fatalf("%d items queued for %d entries", n, entries)
	}
}
