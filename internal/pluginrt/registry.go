package pluginrt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// drainTimeout bounds how long a replaced version may take to finish its
// calls in flight before they are stopped.
const drainTimeout = 30 * time.Second

// Registry holds the current version of each plugin by name. Get is
// lock-free; Install and Rollback swap versions atomically: new calls go
// to the new version at once, calls in flight finish on the old one, which
// is then drained and closed in the background. A caller still holding the
// old *Plugin after the swap is forwarded to the new one, so no call fails
// because of a swap.
type Registry struct {
	h        *Host
	mu       sync.Mutex // guards adding names and onChange
	entries  atomic.Pointer[map[string]*entry]
	onChange []func(name string, p *Plugin)
	bg       sync.WaitGroup
}

// entry is one plugin name.
type entry struct {
	cur atomic.Pointer[Plugin]

	mu      sync.Mutex // serializes swaps of this name
	curWasm []byte
	// prevSHA is the SHA-256 of the version Rollback would restore ("" for
	// none); prevWasm its bytes, nil when this registry never ran it (the
	// caller named it with Commit or SetPrevious).
	prevSHA  string
	prevWasm []byte
	// prevVersion is the version Rollback would restore, read by List
	// without waiting for a swap under way; prevShown is it with its
	// SHA-256, as List shows them.
	prevVersion atomic.Pointer[string]
	prevShown   atomic.Pointer[[2]string]
}

// previous is the version an entry's Rollback would restore.
type previous struct {
	sha, version string
	wasm         []byte
}

// setPrev records prev as the version Rollback restores; e.mu is held.
func (e *entry) setPrev(prev previous) {
	e.prevSHA, e.prevWasm = prev.sha, prev.wasm
	if prev.sha == "" {
		e.prevVersion.Store(nil)
		e.prevShown.Store(nil)
		return
	}
	v := prev.version
	e.prevVersion.Store(&v)
	e.prevShown.Store(&[2]string{v, prev.sha})
}

// known describes the version of SHA-256 sha ("" for none) with what e
// knows of it: its version and bytes when it is the current or the
// previous version, else version as given and no bytes; e.mu is held.
func (e *entry) known(sha, version string) previous {
	switch {
	case sha == "":
		return previous{}
	case e.cur.Load() != nil && e.cur.Load().sha == sha:
		return previous{sha: sha, version: e.cur.Load().desc.Version, wasm: e.curWasm}
	case e.prevSHA == sha:
		if v := *e.prevVersion.Load(); v != "" {
			version = v
		}
		return previous{sha: sha, version: version, wasm: e.prevWasm}
	}
	return previous{sha: sha, version: version}
}

// Info describes an installed plugin for listings.
type Info struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	SHA256   string `json:"sha256"`
	LoadedAt int64  `json:"loaded_at"` // ms since the epoch, as every time the API answers
	Stats    Stats  `json:"stats"`
	// Previous is the version Rollback would restore, if any, and
	// PreviousSHA256 its module's digest: two builds may share a version.
	Previous       *string `json:"previous,omitempty"`
	PreviousSHA256 *string `json:"previous_sha256,omitempty"`
}

// NewRegistry returns an empty registry loading through h.
func NewRegistry(h *Host) *Registry {
	r := &Registry{h: h}
	r.entries.Store(&map[string]*entry{})
	return r
}

// HoldFills holds back the filling of instance pools, as Host.HoldFills.
func (r *Registry) HoldFills() (release func()) { return r.h.HoldFills() }

// FillsHeld reports whether a HoldFills is in force.
func (r *Registry) FillsHeld() bool { return r.h.FillsHeld() }

// Get returns the current version of the plugin called name.
func (r *Registry) Get(name string) (*Plugin, bool) {
	e, ok := (*r.entries.Load())[name]
	if !ok {
		return nil, false
	}
	p := e.cur.Load()
	return p, p != nil
}

// OnChange registers fn, called after every swap and rollback with the
// plugin's name and its new current version. Calls for one name come in
// swap order; fn must not call Install or Rollback for that name.
func (r *Registry) OnChange(fn func(name string, p *Plugin)) {
	r.mu.Lock()
	r.onChange = append(r.onChange, fn)
	r.mu.Unlock()
}

// Install loads wasm, runs check on it (a conformance smoke run supplied
// by the caller; nil for none) and makes it the current version of the
// plugin it describes, the version it replaces becoming the previous one.
// A module failing Load or check is refused with a *LoadError listing
// every reason, and the current version keeps serving. Installing the
// bytes of the current version changes nothing and returns it. wasm must
// not be modified afterwards: it is kept, not copied, for a later
// Rollback.
func (r *Registry) Install(ctx context.Context, wasm []byte, check func(context.Context, *Plugin) error) (*Plugin, error) {
	p, err := r.Prepare(ctx, wasm, check)
	if err != nil {
		return nil, err
	}
	e := r.entry(p.desc.Name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur := e.cur.Load(); cur != nil && cur.sha == p.sha { // the current bytes, or a concurrent Install of them won
		if cur != p {
			r.closeInBackground(p)
		}
		return cur, nil
	}
	prev := previous{}
	if old := e.cur.Load(); old != nil {
		prev = previous{sha: old.sha, version: old.desc.Version, wasm: e.curWasm}
	}
	r.swap(e, p, wasm, prev)
	return p, nil
}

// Prepare loads wasm and runs check on it as Install does, without making
// it current: the caller records the change first (in the store every
// process follows), then calls Commit, or Discard when recording failed,
// so that a change that was not recorded leaves the registry as it was.
// Bytes that are a plugin's current version return that version,
// unchecked.
func (r *Registry) Prepare(ctx context.Context, wasm []byte, check func(context.Context, *Plugin) error) (*Plugin, error) {
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	for _, e := range *r.entries.Load() {
		if cur := e.cur.Load(); cur != nil && cur.sha == sha {
			return cur, nil
		}
	}
	p, err := r.h.load(ctx, wasm, sha)
	if err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(ctx, p); err != nil {
			r.closeInBackground(p)
			return nil, &LoadError{Reasons: checkReasons(err)}
		}
	}
	return p, nil
}

// Commit makes p, prepared from wasm, the current version of its plugin,
// and the version of SHA-256 prev ("" for none) the one Rollback restores,
// whatever this registry ran before: the caller takes both from the store.
// prevVersion names prev when the registry has not run it (Rollback then
// has no bytes to restore it from). It returns the current version: p, or
// the version with p's bytes already current. wasm is kept, not copied.
func (r *Registry) Commit(p *Plugin, wasm []byte, prev, prevVersion string) *Plugin {
	e := r.entry(p.desc.Name)
	e.mu.Lock()
	defer e.mu.Unlock()
	pv := e.known(prev, prevVersion)
	if cur := e.cur.Load(); cur != nil && cur.sha == p.sha {
		if cur != p {
			r.closeInBackground(p)
		}
		e.setPrev(pv)
		return cur
	}
	r.swap(e, p, wasm, pv)
	return p
}

// Discard drops a version Prepare returned and Commit will not get; a
// version that is current is left serving.
func (r *Registry) Discard(p *Plugin) {
	if e, ok := (*r.entries.Load())[p.desc.Name]; ok && e.cur.Load() == p {
		return
	}
	r.closeInBackground(p)
}

// SetPrevious records the version of SHA-256 prev ("" for none) as the one
// Rollback restores for name, as Commit does, without a swap.
func (r *Registry) SetPrevious(name, prev, prevVersion string) {
	e, ok := (*r.entries.Load())[name]
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setPrev(e.known(prev, prevVersion))
}

// Previous returns the SHA-256 of the version Rollback restores for name
// ("" for none).
func (r *Registry) Previous(name string) string {
	e, ok := (*r.entries.Load())[name]
	if !ok {
		return ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.prevSHA
}

// Bytes returns the module of name's current or previous version when its
// SHA-256 is sha and the registry has its bytes, else nil.
func (r *Registry) Bytes(name, sha string) []byte {
	e, ok := (*r.entries.Load())[name]
	if !ok {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.known(sha, "").wasm
}

// Rollback makes the previous version of name current again (reloading
// its bytes, through the compilation cache) and keeps the version it
// replaces as the new previous one. check, when not nil, is run on the
// reloaded version first; refused, it is a *LoadError and the current
// version keeps serving.
func (r *Registry) Rollback(ctx context.Context, name string, check func(context.Context, *Plugin) error) (*Plugin, error) {
	e, ok := (*r.entries.Load())[name]
	if !ok {
		return nil, fmt.Errorf("%w: plugin %q is not installed", ErrNoPrevious, name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prevWasm == nil {
		return nil, fmt.Errorf("%w: plugin %q", ErrNoPrevious, name)
	}
	p, err := r.h.Load(ctx, e.prevWasm)
	if err != nil {
		return nil, fmt.Errorf("wasm: reload previous version of %s: %w", name, err)
	}
	if p.desc.Name != name {
		r.closeInBackground(p)
		return nil, fmt.Errorf("wasm: previous version of %s now describes itself as %s", name, p.desc.Name)
	}
	if check != nil {
		if err := check(ctx, p); err != nil {
			r.closeInBackground(p)
			return nil, &LoadError{Reasons: checkReasons(err)}
		}
	}
	old := e.cur.Load()
	r.swap(e, p, e.prevWasm, previous{sha: old.sha, version: old.desc.Version, wasm: e.curWasm})
	return p, nil
}

// swap makes p current and prev the version Rollback restores; e.mu is
// held.
func (r *Registry) swap(e *entry, p *Plugin, wasm []byte, prev previous) {
	old := e.cur.Swap(p)
	e.setPrev(prev)
	if old != nil {
		old.successor.Store(p)
		r.closeInBackground(old)
		r.h.opts.Logger.Info("plugin swapped", "plugin", p.desc.Name, "from", old.desc.Version, "to", p.desc.Version,
			"sha256", p.sha[:12])
	}
	e.curWasm = wasm
	r.mu.Lock()
	fns := slices.Clone(r.onChange)
	r.mu.Unlock()
	for _, fn := range fns {
		fn(p.desc.Name, p)
	}
}

// entry returns name's entry, adding it (copy on write) when missing.
func (r *Registry) entry(name string) *entry {
	if e, ok := (*r.entries.Load())[name]; ok {
		return e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.entries.Load()
	if e, ok := old[name]; ok {
		return e
	}
	m := make(map[string]*entry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	e := &entry{}
	m[name] = e
	r.entries.Store(&m)
	return e
}

// closeInBackground drains and closes p without holding up the caller.
func (r *Registry) closeInBackground(p *Plugin) {
	r.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			p.log().Warn("closing a replaced plugin version", "err", err)
		}
	})
}

// List describes every installed plugin, by name.
func (r *Registry) List() []Info {
	m := *r.entries.Load()
	out := make([]Info, 0, len(m))
	for _, e := range m {
		p := e.cur.Load()
		if p == nil {
			continue
		}
		info := infoOf(p)
		if shown := e.prevShown.Load(); shown != nil {
			prev, sha := shown[0], shown[1]
			info.Previous, info.PreviousSHA256 = &prev, &sha
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Wait waits until the versions replaced so far are closed (tests, and a
// clean shutdown before Host.Close).
func (r *Registry) Wait() { r.bg.Wait() }

func infoOf(p *Plugin) Info {
	return Info{
		Name: p.desc.Name, Version: p.desc.Version, Kind: p.desc.Kind,
		SHA256: p.sha, LoadedAt: p.loadedAt.UnixMilli(), Stats: p.Stats(),
	}
}

// checkReasons flattens a check's error into reasons: the reasons of a
// *LoadError, the parts of a joined error, or its message.
func checkReasons(err error) []string {
	var le *LoadError
	if errors.As(err, &le) && len(le.Reasons) > 0 {
		return prefix(le.Reasons)
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var rs []string
		for _, e := range j.Unwrap() {
			rs = append(rs, e.Error())
		}
		if len(rs) > 0 {
			return prefix(rs)
		}
	}
	return prefix([]string{err.Error()})
}

func prefix(rs []string) []string {
	out := make([]string, len(rs))
	for i, s := range rs {
		out[i] = "check: " + s
	}
	return out
}
