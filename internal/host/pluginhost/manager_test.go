package pluginhost_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/pluginhost"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/internal/testutil/wait"
)

// TestRestartLoadsActivePluginsSideBySide: at start, the versions active
// in the store load concurrently, so a restart is ready after the slowest
// plugin rather than the sum of them. Each load's check waits (up to 30 s)
// until both loads are inside it at once: loaded one after another, they
// never are.
func TestRestartLoadsActivePluginsSideBySide(t *testing.T) {
	mods, cacheDir := guests(t, "ledger", "notify")
	st := teststore.Open(t, "sqlite")

	// A first process installs both: they become the active versions.
	installAll(t, newManager(t, st, cacheDir, "", nil), []string{"ledger", "notify"}, mods)

	// The restarted process loads them from the store.
	var (
		mu       sync.Mutex
		inside   int
		both     = make(chan struct{})
		bothOnce sync.Once
		waited   []string
	)
	check := func(ctx context.Context, p *wasm.Plugin) error {
		mu.Lock()
		inside++
		if inside == 2 {
			bothOnce.Do(func() { close(both) })
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(30 * time.Second):
			mu.Lock()
			waited = append(waited, p.Description().Name)
			mu.Unlock()
			bothOnce.Do(func() { close(both) }) // the other need not wait too
		}
		return nil
	}
	m := newManager(t, st, cacheDir, "", check)
	startLoaded(t, m)
	mu.Lock()
	defer mu.Unlock()
	if len(waited) > 0 {
		t.Fatalf("%v waited 30 s for the other plugin's load: the active versions loaded one after another", waited)
	}
	for _, name := range []string{"ledger", "notify"} {
		if _, ok := m.Registry().Get(name); !ok {
			t.Errorf("%s not loaded after the restart", name)
		}
	}
}

// TestStartFillsPoolsOnceEveryPluginLoaded: while the start-up plugins
// load, the pools of those already loaded stay at their first instance
// (the others would only compete for the CPU with the loads readiness
// waits for); once all are loaded, every pool fills.
func TestStartFillsPoolsOnceEveryPluginLoaded(t *testing.T) {
	mods, cacheDir := guests(t, "ledger", "notify")
	st := teststore.Open(t, "sqlite")
	installAll(t, newManager(t, st, cacheDir, "", nil), []string{"ledger", "notify"}, mods)

	var (
		mu   sync.Mutex
		held []bool
	)
	var m *pluginhost.Manager
	check := func(context.Context, *wasm.Plugin) error {
		mu.Lock()
		held = append(held, m.Registry().FillsHeld())
		mu.Unlock()
		return nil
	}
	m = newManager(t, st, cacheDir, "", check)
	startLoaded(t, m)
	mu.Lock()
	if len(held) != 2 || !held[0] || !held[1] {
		t.Errorf("pool filling held during each start-up load: %v, want [true true]", held)
	}
	mu.Unlock()
	if m.Registry().FillsHeld() {
		t.Error("pool filling still held once the start-up loading is done")
	}
	for _, name := range []string{"ledger", "notify"} {
		p, ok := m.Registry().Get(name)
		if !ok {
			t.Fatalf("%s not loaded", name)
		}
		wait.Eventually(t, 30*time.Second, name+"'s pool to fill", func() bool {
			s := p.Stats()
			return s.Idle == s.Instances
		})
	}
}

// writeCounter counts the plugin writes made through it.
type writeCounter struct {
	store.Store
	writes atomic.Int32
}

func (w *writeCounter) SavePluginVersion(ctx context.Context, p *store.PluginBinary) error {
	w.writes.Add(1)
	return w.Store.SavePluginVersion(ctx, p)
}

func (w *writeCounter) ActivatePlugin(ctx context.Context, name, sha256 string, now int64) (*store.PluginActivation, error) {
	w.writes.Add(1)
	return w.Store.ActivatePlugin(ctx, name, sha256, now)
}

func (w *writeCounter) ActivatePluginIf(ctx context.Context, name, sha256, expected string, now int64) (*store.PluginActivation, error) {
	w.writes.Add(1)
	return w.Store.ActivatePluginIf(ctx, name, sha256, expected, now)
}

// TestRestartDoesNotRewriteUnchangedPluginFiles: a restart loads the
// plugins of the plugins directory from the store; files whose bytes it
// already runs are not stored and activated again (megabytes written per
// plugin at every start).
func TestRestartDoesNotRewriteUnchangedPluginFiles(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := guests(t, "ledger")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ledger.wasm"), mods[0], 0o644); err != nil {
		t.Fatal(err)
	}
	st := &writeCounter{Store: teststore.Open(t, "sqlite")}
	for round := range 2 {
		st.writes.Store(0)
		m := newManager(t, st, cacheDir, dir, nil)
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := m.WaitLoaded(wctx)
		cancel()
		if err := m.Stop(context.Background()); err != nil {
			t.Fatalf("round %d: stop: %v", round, err)
		}
		if err != nil {
			t.Fatalf("round %d: plugins not loaded: %v", round, err)
		}
		if _, ok := m.Registry().Get("ledger"); !ok {
			t.Fatalf("round %d: ledger not loaded", round)
		}
		switch n := st.writes.Load(); {
		case round == 0 && n == 0:
			t.Fatal("the first start stored nothing: the test proves nothing")
		case round == 1 && n != 0:
			t.Fatalf("the restart made %d plugin writes for an unchanged file, want 0", n)
		}
	}
}

// readCounter counts the plugin versions read from the store.
type readCounter struct {
	store.Store
	reads atomic.Int32
}

func (r *readCounter) GetPluginVersion(ctx context.Context, name, sha256 string) (*store.PluginBinary, error) {
	r.reads.Add(1)
	return r.Store.GetPluginVersion(ctx, name, sha256)
}

// TestRestartTakesActiveVersionsFromLocalCopies: a restart takes the bytes
// of an active version from the built-in plugins or the plugins directory
// when they hold it, and reads the store only for versions found nowhere
// else (one installed through the API).
func TestRestartTakesActiveVersionsFromLocalCopies(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := guests(t, "ledger")
	for _, tc := range []struct {
		name      string
		dir       bool // the module is a file of the plugins directory
		builtin   bool // the module is built in
		wantReads int32
	}{
		{"plugins directory", true, false, 0},
		{"built in", false, true, 0},
		{"installed through the API only", false, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &readCounter{Store: teststore.Open(t, "sqlite")}
			first := newManager(t, st, cacheDir, "", nil)
			if _, err := first.Install(ctx, "ledger", mods[0]); err != nil {
				t.Fatal(err)
			}
			dir := ""
			if tc.dir {
				dir = t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "ledger.wasm"), mods[0], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var builtin map[string][]byte
			if tc.builtin {
				builtin = map[string][]byte{"ledger": mods[0]}
			}
			st.reads.Store(0)
			m := newManagerOpts(t, st, cacheDir, pluginhost.Options{Dir: dir, Builtin: builtin})
			startLoaded(t, m)
			if p, ok := m.Registry().Get("ledger"); !ok || p.SHA256() != sha256Hex(mods[0]) {
				t.Fatalf("ledger not loaded at the active version after the restart")
			}
			if n := st.reads.Load(); n != tc.wantReads {
				t.Errorf("plugin versions read from the store: %d, want %d", n, tc.wantReads)
			}
		})
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// newManager returns a plugin manager of its own wasm host on st, with
// the plugins directory dir ("" for none).
// guests builds the named test guests and precompiles them into the
// shared compilation cache: their modules, in order, and the cache.
func guests(t *testing.T, names ...string) ([][]byte, string) {
	t.Helper()
	gs := make([]wasmtest.Guest, len(names))
	for i, n := range names {
		gs[i] = wasmtest.Guest{Name: n}
	}
	return buildGuests(t, gs...)
}

// buildGuests is guests for builds that may set linker flags or tags.
func buildGuests(t *testing.T, gs ...wasmtest.Guest) ([][]byte, string) {
	t.Helper()
	paths, err := wasmtest.Build(t.Context(), gs...)
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(os.TempDir(), "factline-wasm-test-cache")
	if err := wasmtest.Precompile(t.Context(), cacheDir, true, paths...); err != nil {
		t.Fatal(err)
	}
	mods, err := wasmtest.Read(paths)
	if err != nil {
		t.Fatal(err)
	}
	return mods, cacheDir
}

// installAll installs mods[i] as names[i] through m: they become the
// active versions.
func installAll(t *testing.T, m *pluginhost.Manager, names []string, mods [][]byte) {
	t.Helper()
	for i, name := range names {
		if _, err := m.Install(t.Context(), name, mods[i]); err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
	}
}

// startLoaded starts m, stopped when t ends, and waits up to 2 minutes
// for its start-up plugins to load.
func startLoaded(t *testing.T, m *pluginhost.Manager) {
	t.Helper()
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	wctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := m.WaitLoaded(wctx); err != nil {
		t.Fatalf("plugins not loaded: %v", err)
	}
}

func newManager(t *testing.T, st store.Store, cacheDir, dir string, check func(context.Context, *wasm.Plugin) error) *pluginhost.Manager {
	t.Helper()
	return newManagerOpts(t, st, cacheDir, pluginhost.Options{Dir: dir, Check: check})
}

// newManagerOpts returns a plugin manager of its own wasm host on st with
// opts (their Store and Registry set here).
func newManagerOpts(t *testing.T, st store.Store, cacheDir string, opts pluginhost.Options) *pluginhost.Manager {
	t.Helper()
	host, err := wasm.NewHost(wasm.Options{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	reg := wasm.NewRegistry(host)
	t.Cleanup(func() {
		reg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		host.Close(ctx)
	})
	opts.Store, opts.Registry = st, reg
	m, err := pluginhost.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRollbackAfterARestart: a process started after a version was
// installed rolls back to the version the store records before it, as
// the process that installed it does; with none recorded it still says
// there is no previous version.
func TestRollbackAfterARestart(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := buildGuests(t, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"})
	st := teststore.Open(t, "sqlite")
	first := newManager(t, st, cacheDir, "", nil)
	if _, err := first.Rollback(ctx, "ledger"); !errors.Is(err, wasm.ErrNoPrevious) {
		t.Fatalf("rollback of a plugin never installed: %v", err)
	}
	installAll(t, first, []string{"ledger", "ledger"}, mods)
	restarted := newManager(t, st, cacheDir, "", nil)
	startLoaded(t, restarted)
	p, err := restarted.Rollback(ctx, "ledger")
	if err != nil {
		t.Fatalf("rollback in the restarted process: %v", err)
	}
	if p.SHA256() != sha256Hex(mods[0]) {
		t.Fatalf("rolled back to %s, want the first version", p.Description().Version)
	}
	if cur, _ := restarted.Registry().Get("ledger"); cur.SHA256() != sha256Hex(mods[0]) {
		t.Fatalf("serving %s after the rollback", cur.Description().Version)
	}
	active, err := st.ActivePlugins(ctx)
	if err != nil || len(active) != 1 || active[0].SHA256 != sha256Hex(mods[0]) {
		t.Fatalf("active versions %+v, %v; want the first version", active, err)
	}
	// Rolling back again returns to the version rolled back from.
	if p, err := restarted.Rollback(ctx, "ledger"); err != nil || p.SHA256() != sha256Hex(mods[1]) {
		t.Fatalf("second rollback: %v", err)
	}
}

// pollCounter counts the reads of the active versions: one per poll.
type pollCounter struct {
	store.Store
	polls atomic.Int32
}

func (p *pollCounter) ActivePlugins(ctx context.Context) ([]store.ActivePlugin, error) {
	p.polls.Add(1)
	return p.Store.ActivePlugins(ctx)
}

// TestRefusedActiveVersionWaitsForAModelChange: an active version from
// the store that the check refuses is not loaded and checked again on
// every poll (it was, compiling it every 2 s for ever), only once the
// model changes (Recheck).
func TestRefusedActiveVersionWaitsForAModelChange(t *testing.T) {
	mods, cacheDir := guests(t, "ledger")
	st := &pollCounter{Store: teststore.Open(t, "sqlite")}
	if _, err := newManager(t, st, cacheDir, "", nil).Install(t.Context(), "ledger", mods[0]); err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int32
	m := newManagerOpts(t, st, cacheDir, pluginhost.Options{Poll: 10 * time.Millisecond, Check: func(context.Context, *wasm.Plugin) error {
		checks.Add(1)
		return errors.New("does not fit the model")
	}})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	testutil.Eventually(t, 2*time.Minute, "the active version to be checked", func() bool { return checks.Load() >= 1 })
	polled := st.polls.Load()
	testutil.Eventually(t, time.Minute, "five more polls", func() bool { return st.polls.Load() >= polled+5 })
	if n := checks.Load(); n != 1 {
		t.Fatalf("the refused version was checked %d times over the polls, want once", n)
	}
	m.Recheck()
	testutil.Eventually(t, time.Minute, "the refused version to be checked again after a model change", func() bool { return checks.Load() == 2 })
	if _, ok := m.Registry().Get("ledger"); ok {
		t.Fatal("a refused version was loaded")
	}
}

// flakyStore fails every plugin read and write while down, as a database
// that cannot be reached does.
type flakyStore struct {
	store.Store
	down atomic.Bool
}

func (f *flakyStore) unreachable(op string) error {
	return fmt.Errorf("sqlite: %s: %w: dial tcp 10.0.0.9:5432: connect: connection refused", op, store.ErrUnavailable)
}

func (f *flakyStore) SavePluginVersion(ctx context.Context, p *store.PluginBinary) error {
	if f.down.Load() {
		return f.unreachable("save plugin")
	}
	return f.Store.SavePluginVersion(ctx, p)
}

func (f *flakyStore) ActivatePlugin(ctx context.Context, name, sha256 string, now int64) (*store.PluginActivation, error) {
	if f.down.Load() {
		return nil, f.unreachable("activate plugin")
	}
	return f.Store.ActivatePlugin(ctx, name, sha256, now)
}

func (f *flakyStore) ActivatePluginIf(ctx context.Context, name, sha256, expected string, now int64) (*store.PluginActivation, error) {
	if f.down.Load() {
		return nil, f.unreachable("activate plugin")
	}
	return f.Store.ActivatePluginIf(ctx, name, sha256, expected, now)
}

func (f *flakyStore) ActivePlugins(ctx context.Context) ([]store.ActivePlugin, error) {
	if f.down.Load() {
		return nil, f.unreachable("active plugins")
	}
	return f.Store.ActivePlugins(ctx)
}

// previousOf is the previous version m lists for name, "" for none.
func previousOf(m *pluginhost.Manager, name string) string {
	for _, i := range m.List() {
		if i.Name == name && i.Previous != nil {
			return *i.Previous
		}
	}
	return ""
}

// serving is the version m serves for name, "" for none.
func serving(m *pluginhost.Manager, name string) string {
	if p, ok := m.Registry().Get(name); ok {
		return p.Description().Version
	}
	return ""
}

// TestFailedStoreWriteLeavesTheRegistryAsItWas: an install or a rollback
// whose store write fails (the database cannot be reached) returns the
// store's error, not a refusal, and leaves the versions served and
// listed as they were. The install swapped its version in first: the
// process then listed the version never stored as the previous one, and
// every rollback there asked the store to activate it (not found).
func TestFailedStoreWriteLeavesTheRegistryAsItWas(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := buildGuests(t, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"},
		wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=3.0.0"})
	st := &flakyStore{Store: teststore.Open(t, "sqlite")}
	m := newManager(t, st, cacheDir, "", nil)
	installAll(t, m, []string{"ledger", "ledger"}, mods[:2])

	st.down.Store(true)
	var le *wasm.LoadError
	if _, err := m.Install(ctx, "ledger", mods[2]); !errors.Is(err, store.ErrUnavailable) || errors.As(err, &le) {
		t.Fatalf("install with the store down: %v, want store.ErrUnavailable and no refusal", err)
	}
	if _, err := m.Rollback(ctx, "ledger"); !errors.Is(err, store.ErrUnavailable) || errors.As(err, &le) {
		t.Fatalf("rollback with the store down: %v, want store.ErrUnavailable and no refusal", err)
	}
	if v, prev := serving(m, "ledger"), previousOf(m, "ledger"); v != "2.0.0" || prev != "1.0.0" {
		t.Fatalf("after the failures: serving %q, previous %q; want 2.0.0 and 1.0.0 as before", v, prev)
	}

	st.down.Store(false)
	p, err := m.Rollback(ctx, "ledger")
	if err != nil || p.SHA256() != sha256Hex(mods[0]) {
		t.Fatalf("rollback once the store is back: %v, %v; want the first version", p, err)
	}
	active, err := st.ActivePlugins(ctx)
	if err != nil || len(active) != 1 || active[0].SHA256 != sha256Hex(mods[0]) || active[0].Previous != sha256Hex(mods[1]) {
		t.Fatalf("active versions %+v, %v; want the first version, the second before it", active, err)
	}
	if v, prev := serving(m, "ledger"), previousOf(m, "ledger"); v != "1.0.0" || prev != "2.0.0" {
		t.Fatalf("after the rollback: serving %q, previous %q; want 1.0.0 and 2.0.0", v, prev)
	}
}

// TestPreviousVersionIsTheStores: two processes on one store whose
// installs overlap (b installs before it has loaded a's) agree with the
// store on the previous version, and a rollback through either restores
// it. Each took its own replaced version as the previous one: b rolled
// back past a's install to the version before both. A process that
// serves the active version already takes a changed previous one from
// the store too (an install and a rollback between two of its polls).
func TestPreviousVersionIsTheStores(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := buildGuests(t, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"},
		wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=3.0.0"})
	st := teststore.Open(t, "sqlite")
	a, b := newManager(t, st, cacheDir, "", nil), newManager(t, st, cacheDir, "", nil)
	installAll(t, a, []string{"ledger"}, mods[:1])
	follow := func(m *pluginhost.Manager) {
		t.Helper()
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	follow(b)
	storePrevious := func() string {
		t.Helper()
		active, err := st.ActivePlugins(ctx)
		if err != nil || len(active) != 1 {
			t.Fatalf("active versions %+v, %v", active, err)
		}
		return active[0].Previous
	}
	want := func(step string, m *pluginhost.Manager, version, previous, previousSHA string) {
		t.Helper()
		if v, prev := serving(m, "ledger"), previousOf(m, "ledger"); v != version || prev != previous {
			t.Errorf("%s: serving %q, previous %q; want %q, %q", step, v, prev, version, previous)
		}
		if sp := storePrevious(); sp != previousSHA {
			t.Errorf("%s: the store's previous version is %.12s, want %.12s", step, sp, previousSHA)
		}
	}

	// Overlapping installs: b has not loaded a's version when it installs.
	installAll(t, a, []string{"ledger"}, mods[1:2])
	installAll(t, b, []string{"ledger"}, mods[2:3])
	want("b after the overlapping installs", b, "3.0.0", "2.0.0", sha256Hex(mods[1]))
	follow(a)
	want("a once it loaded b's version", a, "3.0.0", "2.0.0", sha256Hex(mods[1]))
	if p, err := b.Rollback(ctx, "ledger"); err != nil || p.SHA256() != sha256Hex(mods[1]) {
		t.Fatalf("rollback through b: %v, %v; want 2.0.0, the store's previous version", p, err)
	}
	follow(a)
	want("a after b's rollback", a, "2.0.0", "3.0.0", sha256Hex(mods[2]))

	// b installs and rolls back between two of a's polls: a serves the
	// active version already, and takes the new previous one.
	installAll(t, b, []string{"ledger"}, mods[:1])
	if _, err := b.Rollback(ctx, "ledger"); err != nil {
		t.Fatal(err)
	}
	follow(a)
	want("a after b's install and rollback", a, "2.0.0", "1.0.0", sha256Hex(mods[0]))
	if p, err := a.Rollback(ctx, "ledger"); err != nil || p.SHA256() != sha256Hex(mods[0]) {
		t.Fatalf("rollback through a: %v, %v; want 1.0.0, the store's previous version", p, err)
	}
}

// TestRollbackOverlappingAnInstallConflicts: a rollback through one
// process that reads the store's versions before another process installs
// one, and activates after, fails with store.ErrVersionConflict and
// leaves the install in place, and the rolling-back process's versions as
// they were. It restored the version before the one it read, undoing the
// install silently, and the store then named the install as the version
// to roll back to. b's check, which runs between the rollback's read and
// its activation, makes a's install at that point.
func TestRollbackOverlappingAnInstallConflicts(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := buildGuests(t, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"},
		wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=3.0.0"})
	st := teststore.Open(t, "sqlite")
	a := newManager(t, st, cacheDir, "", nil)
	var (
		overlap   atomic.Bool
		installed error
	)
	b := newManager(t, st, cacheDir, "", func(ctx context.Context, _ *wasm.Plugin) error {
		if overlap.CompareAndSwap(true, false) {
			_, installed = a.Install(ctx, "ledger", mods[2])
		}
		return nil
	})
	installAll(t, a, []string{"ledger", "ledger"}, mods[:2])
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if v, prev := serving(b, "ledger"), previousOf(b, "ledger"); v != "2.0.0" || prev != "1.0.0" {
		t.Fatalf("b before the rollback: serving %q, previous %q; want 2.0.0 and 1.0.0", v, prev)
	}

	overlap.Store(true)
	_, err := b.Rollback(ctx, "ledger")
	if overlap.Load() || installed != nil {
		t.Fatalf("a's install did not run inside b's rollback (%v): the test proves nothing", installed)
	}
	if !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("rollback overlapping an install: %v, want store.ErrVersionConflict", err)
	}
	active, err := st.ActivePlugins(ctx)
	if err != nil || len(active) != 1 || active[0].SHA256 != sha256Hex(mods[2]) || active[0].Previous != sha256Hex(mods[1]) {
		t.Fatalf("stored after the overlap: %+v, %v; want a's install (3.0.0) active, 2.0.0 before it", active, err)
	}
	if v, prev := serving(b, "ledger"), previousOf(b, "ledger"); v != "2.0.0" || prev != "1.0.0" {
		t.Fatalf("b after its refused rollback: serving %q, previous %q; want 2.0.0 and 1.0.0 as before", v, prev)
	}
	// Read again, the rollback undoes the install.
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Rollback(ctx, "ledger"); err != nil || p.SHA256() != sha256Hex(mods[1]) {
		t.Fatalf("rollback once b follows: %v, %v; want 2.0.0", p, err)
	}
}

// TestInstallReportsWhetherTheStoreChanged: whether an install changed
// anything (200 or 201 at the endpoint) is the store's answer, not what
// the installing process served: b, which has not followed a, changes
// the store when it sends the version it serves, and changes nothing when
// it sends the one a installed.
func TestInstallReportsWhetherTheStoreChanged(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := buildGuests(t, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"},
		wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=3.0.0"})
	st := teststore.Open(t, "sqlite")
	a, b := newManager(t, st, cacheDir, "", nil), newManager(t, st, cacheDir, "", nil)
	for _, step := range []struct {
		name    string
		m       *pluginhost.Manager
		mod     []byte
		changed bool
	}{
		{"a installs 1.0.0", a, mods[0], true},
		{"a sends 1.0.0 again", a, mods[0], false},
		{"b, serving nothing, sends 1.0.0", b, mods[0], false},
		{"a installs 2.0.0", a, mods[1], true},
		{"b, serving 1.0.0, sends it back", b, mods[0], true},
		{"a installs 3.0.0", a, mods[2], true},
		{"b, serving 1.0.0, sends 3.0.0", b, mods[2], false},
	} {
		_, changed, err := pluginhost.InstallChanged(ctx, step.m, "ledger", step.mod)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if changed != step.changed {
			t.Errorf("%s: changed %v, want %v", step.name, changed, step.changed)
		}
	}
}
