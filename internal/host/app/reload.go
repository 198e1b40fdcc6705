package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/manifests"
)

// BuiltinDomainFile names the built-in domain manifest in problems.
const BuiltinDomainFile = "built-in domain.yaml"

// LoadDomain layers the domain manifests of sources (files, or
// directories of *.yaml) over the built-in one (see manifest.Layer).
func LoadDomain(sources ...string) (*manifest.Domain, error) {
	d, err := manifest.LoadLayered(BuiltinDomainFile, manifests.Domain, sources)
	if err != nil {
		return nil, fmt.Errorf("domain manifest:\n%w", err)
	}
	return d, nil
}

// Reload re-reads the domain manifest sources and the gateway manifest,
// checks them exactly as `factline check` does and the resulting model
// against the one being served and the stored data (see
// manifest.CheckChange), and swaps the model and the route table
// atomically: requests already in flight finish on the old model. A
// change with problems is refused whole and the current model keeps
// serving.
func (a *App) Reload() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.reload(ctx)
}

func (a *App) reload(ctx context.Context) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	files, err := readManifestFiles(a.cfg)
	if err != nil {
		return err
	}
	stored, err := a.Store.ListDomainLayers(ctx)
	if err != nil {
		return fmt.Errorf("read stored domain manifests: %w", err)
	}
	if err := a.applyFilesLocked(ctx, files, stored); err != nil {
		return err
	}
	a.files = files
	return nil
}

// manifestFiles are the --domain files and the --manifest file as read
// from disk. A change through the admin API or another process's stored
// change is built on the files being served, not re-read: a file being
// edited, or one --watch refused, must not refuse (or be blamed in) a
// change that does not touch it. Only SIGHUP and --watch read the disk.
type manifestFiles struct {
	domains []manifest.Source
	gateway *manifest.Source // nil without --manifest
}

func readManifestFiles(cfg Config) (manifestFiles, error) {
	var f manifestFiles
	var err error
	if f.domains, err = manifest.ReadSources(cfg.Domains); err != nil {
		return f, err
	}
	if cfg.Manifest != "" {
		src, err := os.ReadFile(cfg.Manifest)
		if err != nil {
			return f, fmt.Errorf("read gateway manifest: %w", err)
		}
		f.gateway = &manifest.Source{File: cfg.Manifest, Src: src}
	}
	return f, nil
}

// StoredDomainFile names a domain manifest stored through the admin API in
// problems and logs.
func StoredDomainFile(name string) string { return "domain/" + name }

// buildModel layers the --domain files and then the stored domain
// manifests (by name) over the built-in one, and merges the gateway
// manifest's entity types.
func (a *App) buildModel(files manifestFiles, stored []store.DomainLayer) (*manifest.Domain, *manifest.Gateway, error) {
	srcs := slices.Clone(files.domains)
	for _, l := range stored {
		srcs = append(srcs, manifest.Source{File: StoredDomainFile(l.Name), Src: l.Source})
	}
	base, err := manifest.LayerSources(BuiltinDomainFile, manifests.Domain, srcs)
	if err != nil {
		return nil, nil, err
	}
	var gw *manifest.Gateway
	if files.gateway != nil {
		if gw, err = manifest.ParseGateway(files.gateway.File, files.gateway.Src, base); err != nil {
			return nil, nil, err
		}
	}
	// Routes domain manifests carry follow the gateway manifest's.
	if gw, err = manifest.LayerRoutes(base, gw); err != nil {
		return nil, nil, err
	}
	if gw == nil {
		return base, nil, nil
	}
	merged := manifest.MergeDomain(base, gw)
	if err := manifest.CheckCommands(gw, merged, a.describedCommands); err != nil {
		return nil, nil, err
	}
	return merged, gw, nil
}

// describedCommands tells the commands of the ledgers loaded here; a
// plugin not loaded yet is not known, and its command routes answer 503
// until it is.
func (a *App) describedCommands(name string) ([]manifest.LedgerCommand, bool) {
	specs, ok := a.ledgers.Described(name)
	if !ok {
		return nil, false
	}
	out := make([]manifest.LedgerCommand, len(specs))
	for i, c := range specs {
		out[i] = manifest.LedgerCommand{Name: c.Name, Method: c.Method, ReadOnly: c.ReadOnly}
	}
	return out, true
}

// checkLocked builds the model stored would give with the files being
// served and checks it against the served one and the stored data;
// reloadMu is held.
func (a *App) checkLocked(ctx context.Context, stored []store.DomainLayer) (*manifest.Domain, *manifest.Gateway, error) {
	return a.checkFilesLocked(ctx, a.files, stored)
}

func (a *App) checkFilesLocked(ctx context.Context, files manifestFiles, stored []store.DomainLayer) (*manifest.Domain, *manifest.Gateway, error) {
	next, gw, err := a.buildModel(files, stored)
	if err != nil {
		return nil, nil, err
	}
	if err := manifest.CheckChange(ctx, a.Platform.Domain(), next, a.changeEnv()); err != nil {
		return nil, nil, err
	}
	return next, gw, nil
}

// changeEnv is what a domain change is checked against: the stored data
// and the ledgers and handlers installed.
func (a *App) changeEnv() manifest.ChangeEnv {
	return manifest.ChangeEnv{Usage: a.Store, LedgerInstalled: a.ledgerInstalled, LedgerEntityTypes: a.ledgers.EntityTypes,
		PluginKind: a.pluginKind, HandlerServed: a.handlerServed}
}

// applyLocked checks the model stored gives with the files being served
// and swaps it in; reloadMu is held.
func (a *App) applyLocked(ctx context.Context, stored []store.DomainLayer) error {
	return a.applyFilesLocked(ctx, a.files, stored)
}

func (a *App) applyFilesLocked(ctx context.Context, files manifestFiles, stored []store.DomainLayer) error {
	next, gw, err := a.checkFilesLocked(ctx, files, stored)
	if err != nil {
		return err
	}
	cur := a.Platform.Domain()
	// Types new to this process whose ledger plugin is installed but not
	// loaded here yet answer 503 until it is, not the generic ledger.
	var missing []string
	for name, t := range next.Entities {
		if _, ok := cur.Entities[name]; !ok && len(a.ledgers.Missing([]string{t.Ledger})) > 0 {
			missing = append(missing, t.Ledger)
		}
	}
	a.await(missing)
	if err := a.Platform.SetDomain(next); err != nil {
		return err
	}
	// Without a gateway manifest the routes are the domain layers' (none
	// when the last layer with routes went away).
	routes := a.served.Load().routes
	if gw != nil || a.cfg.Manifest == "" {
		a.Server.SetRoutes(gw)
		routes = gw
	}
	a.served.Store(&servedModel{domain: next, routes: routes})
	a.setLayersHash(stored)
	a.refusedWith = ""
	a.Subscriptions.Set(next.Subscriptions)
	// Plugin versions refused against the old model may fit this one.
	a.Plugins.Recheck()
	return nil
}

// pollDomainLayers applies domain manifests installed through another
// process: every process converges within a poll interval.
func (a *App) pollDomainLayers(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Read under the lock: a set read before a change made here
		// committed would, applied after it, undo it until the next poll.
		a.reloadMu.Lock()
		stored, err := a.Store.ListDomainLayers(ctx)
		if err != nil {
			a.reloadMu.Unlock()
			if ctx.Err() == nil {
				a.cfg.Logger.Warn("domain manifest sync with the store failed", "err", err)
			}
			continue
		}
		h, plugins := store.LayersDigest(stored), a.loadedPlugins()
		if h != a.layersHash || (a.refusedWith != "" && plugins != a.refusedWith) {
			if err := a.applyLocked(ctx, stored); err != nil {
				a.cfg.Logger.Error("stored domain manifests refused; the previous model keeps serving", "problems", err.Error())
				// Tried again when the stored set or the loaded plugin
				// versions change: a manifest installed after its plugin
				// can be read here before the plugin is loaded. Not seen:
				// the types and routes it adds answer 503 here meanwhile,
				// not 400 and 404 (modelBehind, routesBehind).
				a.layersHash = store.LayersDigest(stored)
				a.refusedWith = plugins
			} else {
				a.cfg.Logger.Info("stored domain manifests applied", "count", len(stored), "entity_types", len(a.Platform.Domain().Entities))
			}
		}
		a.reloadMu.Unlock()
	}
}

// layerSet is a set of stored domain manifests: their digest
// (store.LayersDigest) and each one's SHA-256 by name.
type layerSet struct {
	digest string
	sha    map[string]string
}

func newLayerSet(layers []store.DomainLayer) *layerSet {
	ls := &layerSet{digest: store.LayersDigest(layers), sha: make(map[string]string, len(layers))}
	for _, l := range layers {
		ls.sha[l.Name] = l.SHA256
	}
	return ls
}

// adds reports whether s holds a manifest other does not, or another
// version of one: a change that may add routes (a removal adds none).
func (s *layerSet) adds(other *layerSet) bool {
	for name, sha := range s.sha {
		if other.sha[name] != sha {
			return true
		}
	}
	return false
}

// setLayersHash records the stored manifests served; reloadMu is held.
func (a *App) setLayersHash(stored []store.DomainLayer) {
	ls := newLayerSet(stored)
	a.layersHash = ls.digest
	a.layersSeen.Store(ls)
}

// modelBehind reports whether the stored domain manifests changed since
// this process last read them: an entity type unknown here may then be
// one it is about to serve. Asked only for unknown entity types, by a
// client holding a key; it reads the store afresh, so that a type another
// process added a moment ago is a 503 to retry here, never a 400.
func (a *App) modelBehind() bool {
	seen, stored := a.storedLayers(true)
	return stored != nil && stored.digest != seen.digest
}

// routesBehind reports whether the stored domain manifests hold one this
// process has not read, or another version of one: a path no route serves
// may then be one a manifest adds. Asked for such paths, by anyone, so it
// may take an answer up to half a second old.
func (a *App) routesBehind() bool {
	seen, stored := a.storedLayers(false)
	return stored != nil && stored.adds(seen)
}

// storedLayers returns the manifests this process last read and those
// stored (nil when unknown). One read of the store is under way at a
// time, and every question asked while it runs shares the next one.
//
// A fresh question takes only an answer read after it was asked: it
// waits for the read under way, then for one begun after it (each is
// bounded by a second). Otherwise the store is read at most twice a
// second while the two match, and again at each question while they
// differ, since this process may have applied the change since; a
// question asked while a read is under way takes the last answer, so a
// slow store holds up no caller behind another's read.
func (a *App) storedLayers(fresh bool) (seen, stored *layerSet) {
	seen = a.layersSeen.Load()
	if seen == nil {
		return nil, nil
	}
	asked := time.Now()
	for range 3 {
		a.behind.Lock()
		cached := a.behind.stored
		var usable bool
		if fresh {
			usable = cached != nil && !a.behind.at.Before(asked)
		} else {
			usable = cached != nil && cached.digest == seen.digest && time.Since(a.behind.at) < 500*time.Millisecond || a.behind.reading != nil
		}
		if usable {
			a.behind.Unlock()
			return seen, cached
		}
		if wait := a.behind.reading; wait != nil {
			a.behind.Unlock()
			<-wait
			continue
		}
		done := make(chan struct{})
		a.behind.reading = done
		a.behind.Unlock()
		started := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		layers, err := a.Store.ListDomainLayers(ctx)
		cancel()
		a.behind.Lock()
		a.behind.reading = nil
		if err == nil {
			// Stamped with when the read began: a change committed after
			// that may be missing from it.
			a.behind.at, a.behind.stored = started, newLayerSet(layers)
		}
		stored = a.behind.stored
		a.behind.Unlock()
		close(done)
		if err != nil {
			return seen, nil
		}
		return seen, stored
	}
	return seen, nil
}

// loadedPlugins identifies the plugin versions loaded here and those
// still loading.
func (a *App) loadedPlugins() string {
	var b strings.Builder
	for _, p := range a.Plugins.List() {
		fmt.Fprintf(&b, "%s@%s ", p.Name, p.SHA256)
	}
	fmt.Fprintf(&b, "pending %s", strings.Join(a.Plugins.PendingNames(), " "))
	return b.String()
}

// ledgerInstalled reports whether a ledger name is built in, or a plugin
// of that name is loaded, loading, built into the binary or active in the
// store (installed through another process).
func (a *App) ledgerInstalled(ctx context.Context, name string) (bool, error) {
	if _, ok := a.ledgers.Builtin.Ledger(name); ok {
		return true, nil
	}
	if len(a.ledgers.Missing([]string{name})) == 0 || a.Plugins.Pending(name) {
		return true, nil
	}
	if _, ok := a.builtinPlugins()[name]; ok {
		return true, nil
	}
	act, err := a.Store.ActivePlugins(ctx)
	if err != nil {
		return false, fmt.Errorf("list installed plugins: %w", err)
	}
	for _, p := range act {
		if p.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// handlerServed reports whether a subscription plugin loaded here serves
// a handler name, or whether this process cannot tell: a plugin still
// loading, or one built in or active in the store that it has not loaded.
func (a *App) handlerServed(ctx context.Context, handler string) (bool, error) {
	if _, ok := a.Plugins.SubscriptionHandler(handler); ok {
		return true, nil
	}
	if len(a.Plugins.PendingNames()) > 0 {
		return true, nil
	}
	for name := range a.builtinPlugins() {
		if a.pluginKind(name) == "" {
			return true, nil
		}
	}
	act, err := a.Store.ActivePlugins(ctx)
	if err != nil {
		return false, fmt.Errorf("list installed plugins: %w", err)
	}
	for _, p := range act {
		if a.pluginKind(p.Name) == "" {
			return true, nil
		}
	}
	return false, nil
}

// pluginKind is the kind of the plugin of that name loaded here, or "".
func (a *App) pluginKind(name string) string {
	if a.ledgers.Registry == nil {
		return ""
	}
	if p, ok := a.ledgers.Registry.Get(name); ok {
		return p.Description().Kind
	}
	return ""
}

// watchManifest reloads on each signal from hup (SIGHUP) and, with Watch, when the file's content
// changes (polled once a second: portable, and a manifest is small).
func (a *App) watchManifest(ctx context.Context, hup <-chan os.Signal) {
	var tick <-chan time.Time
	if a.cfg.Watch {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	last := a.manifestHash
	unreadable := "" // the last read failure logged
	reload := func(why string) {
		if err := a.reload(ctx); err != nil {
			a.cfg.Logger.Error("manifests refused; the previous model and routes keep serving", "gateway", a.cfg.Manifest, "domain", a.cfg.Domains, "trigger", why, "problems", err.Error())
			return
		}
		routes := 0
		if rt := a.Server.Routes(); rt != nil {
			routes = len(rt.Routes)
		}
		a.cfg.Logger.Info("manifests reloaded", "gateway", a.cfg.Manifest, "domain", a.cfg.Domains, "trigger", why,
			"routes", routes, "entity_types", len(a.Platform.Domain().Entities))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			last, _ = sourcesHash(a.cfg)
			reload("SIGHUP")
		case <-tick:
			h, err := sourcesHash(a.cfg)
			switch {
			case err != nil:
				// Said once per cause: a deleted or unreadable file is
				// not a change to apply, and the watch goes on.
				if msg := err.Error(); msg != unreadable {
					unreadable = msg
					a.cfg.Logger.Warn("manifests cannot be read; the loaded model and routes keep serving until they can", "err", msg)
				}
			case !bytes.Equal(h, last):
				unreadable = ""
				last = h
				reload("file changed")
			default:
				unreadable = ""
			}
		}
	}
}

// sourcesHash hashes the gateway manifest and the domain manifest files
// (names and content: a file added to a domain directory counts), or
// says which cannot be read.
func sourcesHash(cfg Config) ([]byte, error) {
	h := sha256.New()
	files, err := manifest.DomainFiles(cfg.Domains)
	if err != nil {
		return nil, err
	}
	if cfg.Manifest != "" {
		files = append(files, cfg.Manifest)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return h.Sum(nil), nil
}

// await adds ledger names to those whose types answer 503 until a plugin
// of the name is loaded here (awaited).
func (a *App) await(names []string) {
	if len(names) == 0 {
		return
	}
	a.awaitMu.Lock()
	defer a.awaitMu.Unlock()
	awaited := map[string]bool{}
	if aw := a.awaited.Load(); aw != nil {
		for n := range *aw {
			awaited[n] = true
		}
	}
	for _, n := range names {
		awaited[n] = true
	}
	a.awaited.Store(&awaited)
}
