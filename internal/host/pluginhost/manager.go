package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/internal/lifecycle"
	"github.com/factline/factline/sdk/abi"
)

// Options configure a Manager.
type Options struct {
	Store    store.PluginStore
	Registry *wasm.Registry
	// Dir is a directory of *.wasm files loaded at start and watched; ""
	// for none.
	Dir string
	// Builtin are plugin binaries shipped with the product, loaded when
	// the store has no active version of them.
	Builtin map[string][]byte
	// Check is run on every new version before it is swapped in (a
	// conformance smoke run); nil skips it.
	Check func(context.Context, *wasm.Plugin) error
	// Poll is how often the directory and the store are checked for new
	// versions (default 2 s).
	Poll   time.Duration
	Logger *slog.Logger
	Now    func() time.Time
}

// Manager keeps the plugin registry in step with the store and the
// plugins directory.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex        // serialises installs and rollbacks
	dirSeen map[string]string // file path -> sha256 last seen
	bg      lifecycle.Base

	pmu     sync.Mutex
	pending map[string]bool // names loading at start-up
	loaded  chan struct{}   // closed when start-up loading is done
	loadCut atomic.Bool     // a stop cut the start-up loading short

	// refused holds the active versions from the store that the check
	// refused, by name, with the model generation they were refused
	// under: tried again only once the model changes (Recheck), not on
	// every poll.
	rmu      sync.Mutex
	refused  map[string]refusal
	modelGen atomic.Uint64
}

type refusal struct {
	sha string
	gen uint64
}

// Recheck says the model the check holds plugins against has changed:
// active versions refused under the old one are tried again.
func (m *Manager) Recheck() { m.modelGen.Add(1) }

// wasRefused reports whether the active version sha of name was refused
// under the current model.
func (m *Manager) wasRefused(name, sha string) bool {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	r, ok := m.refused[name]
	return ok && r.sha == sha && r.gen == m.modelGen.Load()
}

func (m *Manager) refuse(name, sha string, gen uint64) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if m.refused == nil {
		m.refused = map[string]refusal{}
	}
	m.refused[name] = refusal{sha: sha, gen: gen}
}

// NewManager returns a manager; call Start to load plugins.
func NewManager(opts Options) (*Manager, error) {
	if opts.Store == nil || opts.Registry == nil {
		return nil, errors.New("plugins: a store and a registry are required")
	}
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{opts: opts, log: opts.Logger, dirSeen: map[string]string{}}, nil
}

// Registry returns the wasm registry the manager keeps.
func (m *Manager) Registry() *wasm.Registry { return m.opts.Registry }

// Start begins loading plugins in the background and returns at once:
// compiling a module takes seconds, and the gateway should answer (with
// /health saying what is still loading) meanwhile. It loads the versions
// active in the store, then built-in plugins the store does not have, then
// the plugins directory, then keeps watching the directory and the store
// until Stop. While a plugin is loading, Pending reports its name; a plugin
// that fails to load is logged and skipped, the others still serve.
func (m *Manager) Start(ctx context.Context) error {
	select {
	case <-m.bg.Started():
		return fmt.Errorf("plugins: %w", lifecycle.ErrStarted)
	default:
	}
	act, err := m.opts.Store.ActivePlugins(ctx)
	if err != nil {
		return fmt.Errorf("plugins: list active versions: %w", err)
	}
	m.pmu.Lock()
	m.pending = map[string]bool{}
	for _, a := range act {
		m.pending[a.Name] = true
	}
	for name := range m.opts.Builtin {
		m.pending[name] = true
	}
	if m.opts.Dir != "" {
		files, _ := filepath.Glob(filepath.Join(m.opts.Dir, "*.wasm"))
		for _, f := range files {
			m.pending[strings.TrimSuffix(filepath.Base(f), ".wasm")] = true
		}
	}
	m.pmu.Unlock()
	loaded := make(chan struct{})
	m.loaded = loaded
	// Until every start-up plugin is loaded, each has the one instance its
	// load makes; the rest of the pools are made afterwards, so that
	// readiness waits only for what it promises.
	releaseFills := m.opts.Registry.HoldFills()
	err = m.bg.Start(context.WithoutCancel(ctx), func(pctx context.Context) {
		m.initialLoad(pctx)
		m.loadCut.Store(pctx.Err() != nil)
		releaseFills()
		m.pmu.Lock()
		m.pending = nil
		m.pmu.Unlock()
		close(loaded)
		m.poll(pctx)
	})
	if err != nil {
		releaseFills()
		return fmt.Errorf("plugins: %w", err)
	}
	return nil
}

func (m *Manager) initialLoad(ctx context.Context) {
	// The active versions are usually the built-in plugins or files of the
	// plugins directory: their bytes are taken from there rather than read
	// again from the store (megabytes each, most of a restart's store time).
	files := m.readDir()
	local := make(map[string][]byte, len(m.opts.Builtin)+len(files))
	for _, b := range m.opts.Builtin {
		local[hexSum(b)] = b
	}
	for _, f := range files {
		local[f.sum] = f.wasm
	}
	// A load cut short by a stop (the process failing to start, say) is
	// not an error worth a line before the real one.
	if err := m.syncStore(ctx, local); err != nil && ctx.Err() == nil {
		m.log.Error("loading the active plugin versions failed", "err", err)
	}
	active, err := m.activeNames(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Error("loading the active plugin versions failed", "err", err)
		}
		active = map[string]bool{}
	}
	names := make([]string, 0, len(m.opts.Builtin))
	for n := range m.opts.Builtin {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		if !active[name] {
			if _, err := m.Install(ctx, name, m.opts.Builtin[name]); err != nil && ctx.Err() == nil {
				m.log.Error("built-in plugin refused", "plugin", name, "err", err)
			}
		}
		m.done1(name)
	}
	m.syncDir(ctx, files)
}

// done1 marks a name as no longer loading.
func (m *Manager) done1(name string) {
	m.pmu.Lock()
	delete(m.pending, name)
	m.pmu.Unlock()
}

// Pending reports whether a plugin of that name is still being loaded at
// start-up.
func (m *Manager) Pending(name string) bool {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	return m.pending[name]
}

// PendingNames lists the plugins still loading.
func (m *Manager) PendingNames() []string {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	return slices.Sorted(maps.Keys(m.pending))
}

// Loaded reports whether the start-up loading has finished.
func (m *Manager) Loaded() bool {
	if m.loaded == nil {
		return false
	}
	select {
	case <-m.loaded:
		return true
	default:
		return false
	}
}

// WaitLoaded waits until the start-up loading has finished.
func (m *Manager) WaitLoaded(ctx context.Context) error {
	if m.loaded == nil {
		return errors.New("plugins: not started")
	}
	select {
	case <-m.loaded:
		if m.loadCut.Load() {
			return errors.New("plugins: stopped before the start-up plugins were loaded")
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop ends the loading and the watching and waits for them, within ctx.
func (m *Manager) Stop(ctx context.Context) error {
	return m.bg.Stop(ctx)
}

func (m *Manager) poll(ctx context.Context) {
	t := time.NewTicker(m.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.syncStore(ctx, nil); err != nil && ctx.Err() == nil {
				m.log.Warn("plugin sync with the store failed", "err", err)
			}
			m.syncDir(ctx, m.readDir())
		}
	}
}

func (m *Manager) activeNames(ctx context.Context) (map[string]bool, error) {
	act, err := m.opts.Store.ActivePlugins(ctx)
	if err != nil {
		return nil, fmt.Errorf("plugins: list active versions: %w", err)
	}
	out := map[string]bool{}
	for _, a := range act {
		out[a.Name] = true
	}
	return out, nil
}

// Sync brings the registry in step with the store now, as every poll
// does: it loads the active versions this process does not run yet and
// takes the previous version of each plugin from the store.
func (m *Manager) Sync(ctx context.Context) error { return m.syncStore(ctx, nil) }

// syncStore loads every active version the registry does not run yet: how
// a version installed through another process reaches this one. local
// holds module bytes by their SHA-256, used instead of the store's copy.
func (m *Manager) syncStore(ctx context.Context, local map[string][]byte) error {
	// m.mu is taken before the active versions are read: an install or
	// rollback holding it activates its version in the store, and a list
	// read before it finished would load the version it replaced.
	m.mu.Lock()
	defer m.mu.Unlock()
	act, err := m.opts.Store.ActivePlugins(ctx)
	if err != nil {
		return fmt.Errorf("plugins: list active versions: %w", err)
	}
	// The versions load side by side (a load is mostly compiling, or
	// reading compiled code from the cache, and instantiating the pool):
	// a restart is ready after the slowest plugin, not the sum of them.
	// m.mu, held throughout, keeps installs and rollbacks out meanwhile.
	var wg sync.WaitGroup
	for _, a := range act {
		if p, ok := m.opts.Registry.Get(a.Name); ok && p.SHA256() == a.SHA256 {
			// Serving the active version already; the previous one may
			// have changed meanwhile (an install and a rollback between
			// two polls).
			if m.opts.Registry.Previous(a.Name) != a.Previous {
				m.opts.Registry.SetPrevious(a.Name, a.Previous, a.PreviousVersion)
			}
			continue
		}
		if m.wasRefused(a.Name, a.SHA256) {
			continue
		}
		gen := m.modelGen.Load()
		wg.Add(1)
		go func() {
			defer wg.Done()
			module, from := local[a.SHA256], "local copy"
			if module == nil {
				bin, err := m.opts.Store.GetPluginVersion(ctx, a.Name, a.SHA256)
				if err != nil {
					if ctx.Err() == nil {
						m.log.Error("active plugin version missing from the store", "plugin", a.Name, "sha256", a.SHA256, "err", err)
					}
					return
				}
				module, from = bin.Wasm, "store"
			}
			reg := m.opts.Registry
			p, err := reg.Prepare(ctx, module, m.checkFor(a.Name))
			if err != nil {
				if ctx.Err() == nil {
					m.log.Error("active plugin version refused; tried again when the domain model changes", "plugin", a.Name, "sha256", a.SHA256, "err", err)
					var le *wasm.LoadError
					if errors.As(err, &le) {
						m.refuse(a.Name, a.SHA256, gen)
					}
				}
				return
			}
			// The previous version is the store's, not the one this
			// process served: they differ when installs overlapped, or
			// when this process missed a version between two polls.
			p = reg.Commit(p, module, a.Previous, a.PreviousVersion)
			m.log.Info("active plugin version loaded", "plugin", a.Name, "version", p.Description().Version, "sha256", a.SHA256, "from", from)
			m.done1(a.Name)
		}()
	}
	wg.Wait()
	return nil
}

// dirFile is a *.wasm file of the plugins directory, read.
type dirFile struct {
	path, sum string
	wasm      []byte
}

// readDir reads the *.wasm files of the plugins directory; files that
// cannot be read are left for the next poll.
func (m *Manager) readDir() []dirFile {
	if m.opts.Dir == "" {
		return nil
	}
	paths, err := filepath.Glob(filepath.Join(m.opts.Dir, "*.wasm"))
	if err != nil {
		return nil
	}
	files := make([]dirFile, 0, len(paths))
	for _, f := range paths {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		files = append(files, dirFile{path: f, sum: hexSum(b), wasm: b})
	}
	return files
}

// syncDir installs the files of the plugins directory (read by readDir)
// that are new or changed since last seen.
func (m *Manager) syncDir(ctx context.Context, files []dirFile) {
	for _, file := range files {
		f, b, sum := file.path, file.wasm, file.sum
		if m.dirSeen[f] == sum {
			continue
		}
		m.dirSeen[f] = sum
		name := strings.TrimSuffix(filepath.Base(f), ".wasm")
		if cur, ok := m.opts.Registry.Get(name); ok && cur.SHA256() == sum {
			// Already running, loaded from the store (a restart): storing
			// and activating its bytes again would only rewrite them.
			m.done1(name)
			continue
		}
		p, err := m.Install(ctx, "", b)
		m.done1(name)
		var refused *wasm.LoadError
		switch {
		case err == nil:
		case ctx.Err() != nil:
			// Stopped: not refused. Seen again at the next start.
			delete(m.dirSeen, f)
			continue
		case !errors.As(err, &refused):
			// Not stored (the database cannot be reached, say): the file
			// is tried again at the next poll, as it was never seen.
			delete(m.dirSeen, f)
			m.log.Warn("plugin file not stored yet; tried again at the next poll", "file", f, "err", err)
			continue
		default:
			m.log.Error("plugin file refused; the current version keeps serving", "file", f, "err", err)
			continue
		}
		m.log.Info("plugin file loaded", "file", f, "plugin", p.Description().Name, "version", p.Description().Version)
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkFor wraps the configured check with the name the caller expects
// ("" accepts any).
func (m *Manager) checkFor(name string) func(context.Context, *wasm.Plugin) error {
	return func(ctx context.Context, p *wasm.Plugin) error {
		d := p.Description()
		if name != "" && d.Name != name {
			return fmt.Errorf("the module describes itself as %q, not %q", d.Name, name)
		}
		// A handler is served by one plugin: another's handler of the same
		// name would take its facts from it, silently.
		if d.Kind == abi.KindSubscription {
			for _, h := range d.Handlers {
				if other, ok := m.SubscriptionHandler(h); ok && other.Description().Name != d.Name {
					return fmt.Errorf("handler %q is served by plugin %q already: a handler name is served by one plugin (rename the handler, or install this module as a version of %s)",
						h, other.Description().Name, other.Description().Name)
				}
			}
		}
		if m.opts.Check != nil {
			return m.opts.Check(ctx, p)
		}
		return nil
	}
}

// Install loads a new version of a plugin, checks it, records it in the
// store as the active version, so other processes follow, and then swaps
// it in. name, when not empty, must be the name the module describes.
//
// The store comes first: a version it did not record must not serve here,
// nor become this process's previous version, since no other process (nor
// this one after a restart) could load it. Refused or not recorded, the
// install leaves the registry as it was; a store error is returned as it
// is (store.ErrUnavailable, say), apart from the *wasm.LoadError of a
// refused module.
func (m *Manager) Install(ctx context.Context, name string, module []byte) (*wasm.Plugin, error) {
	p, _, err := m.install(ctx, name, module)
	return p, err
}

// install is Install that also reports whether the store changed: false
// when these bytes were its active version already, whatever this process
// served (another process may have installed them, or replaced them with a
// version this one has not loaded yet).
func (m *Manager) install(ctx context.Context, name string, module []byte) (*wasm.Plugin, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	reg := m.opts.Registry
	p, err := reg.Prepare(ctx, module, m.checkFor(name))
	if err != nil {
		return nil, false, err
	}
	d := p.Description()
	if name != "" && d.Name != name {
		// The registry skips the check for bytes it already runs (under
		// their own name).
		reg.Discard(p)
		return nil, false, &wasm.LoadError{Reasons: []string{fmt.Sprintf("the module describes itself as %q, not %q", d.Name, name)}}
	}
	if err := m.opts.Store.SavePluginVersion(ctx, &store.PluginBinary{Name: d.Name, SHA256: p.SHA256(), Version: d.Version, Wasm: module, CreatedAt: m.opts.Now().UnixMilli()}); err != nil {
		reg.Discard(p)
		return nil, false, fmt.Errorf("plugins: store %s: %w", d.Name, err)
	}
	// Unconditional: two installs at once through two processes end as
	// one after the other would, the later replacing the earlier.
	a, err := m.opts.Store.ActivatePlugin(ctx, d.Name, p.SHA256(), m.opts.Now().UnixMilli())
	if err != nil {
		reg.Discard(p)
		return nil, false, fmt.Errorf("plugins: activate %s: %w", d.Name, err)
	}
	// The previous version is the one the store replaced, which is not
	// this process's current one when another process installed a version
	// it has not loaded yet.
	return reg.Commit(p, module, a.Previous, a.PreviousVersion), a.Changed, nil
}

// Rollback makes the version the store records as active before the
// current one active again, here and, through the store, in every
// process: the store is the source of truth, so every process rolls back
// to the same version, one started after the install included. The
// version is checked as an install is: every process checks the versions
// it loads from the store, so one that no longer fits the model would
// serve only where it was rolled back. wasm.ErrNoPrevious when the store
// records none; as Install, a failure leaves the registry as it was.
//
// The version undone is the one read from the store first: a change
// another process made to the plugin meanwhile fails the rollback with
// store.ErrVersionConflict rather than being undone with it (the rollback
// would restore the version before the one it read, and name the other
// process's version as the previous one).
func (m *Manager) Rollback(ctx context.Context, name string) (*wasm.Plugin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	active, err := m.opts.Store.ActivePlugins(ctx)
	if err != nil {
		return nil, fmt.Errorf("plugins: read active versions: %w", err)
	}
	i := slices.IndexFunc(active, func(a store.ActivePlugin) bool { return a.Name == name })
	if i < 0 || active[i].Previous == "" {
		return nil, fmt.Errorf("%w: plugin %q", wasm.ErrNoPrevious, name)
	}
	cur, prev := active[i].SHA256, active[i].Previous
	reg := m.opts.Registry
	module := reg.Bytes(name, prev)
	if module == nil {
		bin, err := m.opts.Store.GetPluginVersion(ctx, name, prev)
		if err != nil {
			return nil, fmt.Errorf("plugins: read the previous version of %s: %w", name, err)
		}
		module = bin.Wasm
	}
	p, err := reg.Prepare(ctx, module, m.checkFor(name))
	if err != nil {
		return nil, err
	}
	if d := p.Description(); d.Name != name { // bytes another plugin runs: unchecked
		reg.Discard(p)
		return nil, &wasm.LoadError{Reasons: []string{fmt.Sprintf("the previous version describes itself as %q, not %q", d.Name, name)}}
	}
	a, err := m.opts.Store.ActivatePluginIf(ctx, name, prev, cur, m.opts.Now().UnixMilli())
	if err != nil {
		reg.Discard(p)
		return nil, fmt.Errorf("plugins: activate %s: %w", name, err)
	}
	return reg.Commit(p, module, a.Previous, a.PreviousVersion), nil
}

// List describes the loaded plugins.
func (m *Manager) List() []wasm.Info { return m.opts.Registry.List() }

// SubscriptionHandler finds the loaded subscription plugin serving a
// handler name.
func (m *Manager) SubscriptionHandler(handler string) (*wasm.Plugin, bool) {
	for _, info := range m.opts.Registry.List() {
		if info.Kind != abi.KindSubscription {
			continue
		}
		p, ok := m.opts.Registry.Get(info.Name)
		if !ok {
			continue
		}
		for _, h := range p.Description().Handlers {
			if h == handler {
				return p, true
			}
		}
	}
	return nil, false
}

// LoadDir reads every *.wasm file of a directory into a name -> bytes map
// (the name is the file name without .wasm).
func LoadDir(dir string) (map[string][]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(filepath.Base(f), ".wasm")] = b
	}
	return out, nil
}

// Smoke is the check run on every new version before it serves: the
// module must answer an unknown command (or handler) with the ABI's
// unknown-command reply, not a trap, within its deadline.
func Smoke(ctx context.Context, p *wasm.Plugin) error {
	// The check is the host's, not a call of the plugin's users: its
	// "unknown command" answer is no error in the plugin's statistics.
	ctx = wasm.Unrecorded(ctx)
	d := p.Description()
	var err error
	switch d.Kind {
	case abi.KindLedger:
		_, err = p.Decide(ctx, abi.DecideInput{Command: "factline.smoke.unknown", Entity: abi.EntityRef{ID: "smoke", Type: firstOr(d.EntityTypes, "smoke"), TenantID: "smoke", Version: 1},
			State: []byte("null"), Input: []byte("{}"), Now: 1})
	case abi.KindSubscription:
		_, err = p.Handle(ctx, abi.HandleInput{Handler: "factline.smoke.unknown", Fact: abi.Fact{ID: "fct_smoke", Type: "smoke", Timestamp: 1, Data: []byte("{}")}})
	default:
		return fmt.Errorf("unknown plugin kind %q", d.Kind)
	}
	var ce *wasm.CallError
	if errors.As(err, &ce) && ce.Status == abi.StatusUnknownCommand {
		return nil
	}
	if err == nil {
		return errors.New("smoke run: an unknown command was accepted; it must be answered with status 3 (unknown command)")
	}
	return fmt.Errorf("smoke run: an unknown command must be answered with status 3 (unknown command), got: %w", err)
}

func firstOr(list []string, def string) string {
	if len(list) > 0 {
		return list[0]
	}
	return def
}
