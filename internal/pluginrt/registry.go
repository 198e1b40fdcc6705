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

	mu       sync.Mutex // serializes swaps of this name
	curWasm  []byte
	prevWasm []byte
	// prevVersion is the version Rollback would restore, read by List
	// without waiting for a swap under way.
	prevVersion atomic.Pointer[string]
}

// Info describes an installed plugin for listings.
type Info struct {
	Name     string    `json:"name"`
	Version  string    `json:"version"`
	Kind     string    `json:"kind"`
	SHA256   string    `json:"sha256"`
	LoadedAt time.Time `json:"loaded_at"`
	Stats    Stats     `json:"stats"`
	// Previous is the version Rollback would restore, if any.
	Previous *string `json:"previous,omitempty"`
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
// plugin it describes. A module failing Load or check is refused with a
// *LoadError listing every reason, and the current version keeps serving.
// Installing the bytes of the current version changes nothing and returns
// it. wasm must not be modified afterwards: it is kept, not copied, for
// a later Rollback.
func (r *Registry) Install(ctx context.Context, wasm []byte, check func(context.Context, *Plugin) error) (*Plugin, error) {
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
	e := r.entry(p.desc.Name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur := e.cur.Load(); cur != nil && cur.sha == p.sha { // a concurrent Install of the same bytes won
		r.closeInBackground(p)
		return cur, nil
	}
	r.swap(e, p, wasm)
	return p, nil
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
	r.swap(e, p, e.prevWasm)
	return p, nil
}

// swap makes p current; e.mu is held.
func (r *Registry) swap(e *entry, p *Plugin, wasm []byte) {
	old := e.cur.Swap(p)
	if old != nil {
		v := old.desc.Version
		e.prevVersion.Store(&v)
		e.prevWasm = e.curWasm
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
		if v := e.prevVersion.Load(); v != nil {
			prev := *v
			info.Previous = &prev
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
		SHA256: p.sha, LoadedAt: p.loadedAt, Stats: p.Stats(),
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
