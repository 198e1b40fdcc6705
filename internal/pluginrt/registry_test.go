package pluginrt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil/wait"
)

func newRegistry(t *testing.T, opts Options) *Registry {
	t.Helper()
	r := NewRegistry(newHost(t, opts))
	t.Cleanup(r.Wait)
	return r
}

func install(t *testing.T, r *Registry, name string) *Plugin {
	t.Helper()
	p, err := r.Install(t.Context(), guests[name], nil)
	if err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
	return p
}

// TestInstallUnderLoad swaps the ledger 10 times while 8 goroutines call
// it without pause: no call fails, and afterwards every call runs the new
// version. (Not parallel: it measures nothing, but it wants the CPU.)
func TestInstallUnderLoad(t *testing.T) {
	// A generous deadline: eight goroutines calling without pause on two
	// cores, plus the loads, can keep a call off the CPU for longer than
	// the default 100ms, and this test is about swapping, not deadlines.
	r := newRegistry(t, Options{PoolSize: 2, CallTimeout: 5 * time.Second})
	var changes atomic.Int64
	r.OnChange(func(name string, p *Plugin) {
		if name != "ledger" || p == nil {
			t.Errorf("OnChange(%q, %v)", name, p)
		}
		changes.Add(1)
	})
	first := install(t, r, "ledger")
	ctx := t.Context()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	seen := [3]atomic.Int64{} // calls answered by 1.0.0, 2.0.0 and 3.0.0
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, ok := r.Get("ledger")
				if !ok {
					failed.Add(1)
					t.Error("Get found no ledger")
					return
				}
				res, err := p.Decide(ctx, decideInput("deposit", `{"amount":"1.25"}`))
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					t.Errorf("call during the swaps: %v", err)
					continue
				}
				switch v := pluginVersion(t, res); v {
				case "1.0.0", "2.0.0", "3.0.0":
					seen[v[0]-'1'].Add(1)
				default:
					failed.Add(1)
					t.Errorf("version %q", v)
				}
			}
		})
	}
	// Ten swaps, alternating 2.0.0 and 3.0.0, ending on 3.0.0.
	for i := range 10 {
		name := "ledger2"
		if i%2 == 1 {
			name = "ledger3"
		}
		v := &seen[1+i%2]
		before := v.Load()
		p := install(t, r, name)
		if cur, _ := r.Get("ledger"); cur != p {
			t.Errorf("swap %d: Get returned %v, installed %v", i, cur, p)
		}
		// Calls reach each version before the next swap.
		wait.Eventually(t, 30*time.Second, "calls on "+name, func() bool { return v.Load() > before || failed.Load() > 0 })
	}
	close(stop)
	wg.Wait()

	t.Logf("%d calls during 10 swaps: %d on 1.0.0, %d on 2.0.0, %d on 3.0.0", calls.Load(), seen[0].Load(), seen[1].Load(), seen[2].Load())
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed during the swaps", failed.Load(), calls.Load())
	}
	if calls.Load() < 100 || seen[1].Load() == 0 || seen[2].Load() == 0 {
		t.Errorf("too little load to prove anything: %d calls", calls.Load())
	}
	for range 20 {
		p, _ := r.Get("ledger")
		res, err := p.Decide(ctx, decideInput("deposit", `{"amount":"1"}`))
		if err != nil || pluginVersion(t, res) != "3.0.0" {
			t.Fatalf("after the swaps: %s %v", res.Result, err)
		}
	}
	if changes.Load() != 11 {
		t.Errorf("OnChange called %d times, want 11", changes.Load())
	}
	// Replaced versions drain and close; a caller still holding one is
	// served by the current version.
	r.Wait()
	select {
	case <-first.closedCh:
	default:
		t.Error("the first version is still open")
	}
	res, err := first.Decide(ctx, decideInput("deposit", `{"amount":"1"}`))
	if err != nil || pluginVersion(t, res) != "3.0.0" {
		t.Errorf("a call through the replaced version: %s %v", res.Result, err)
	}
	list := r.List()
	if len(list) != 1 || list[0].Name != "ledger" || list[0].Version != "3.0.0" || list[0].Previous == nil || *list[0].Previous != "2.0.0" {
		t.Errorf("List = %+v", list)
	}
	// Two builds may share a version: the digest tells them apart.
	if sha := list[0].PreviousSHA256; sha == nil || *sha == "" || *sha != r.Previous("ledger") || *sha == list[0].SHA256 {
		t.Errorf("List previous digest = %v, want the previous build's %s", sha, r.Previous("ledger"))
	}
}

func TestInstallRefusedKeepsTheOldVersion(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, Options{PoolSize: 1})
	v1 := install(t, r, "ledger")

	// A module failing Load is refused with its reasons.
	if _, err := r.Install(t.Context(), guests["badabi"], nil); !isLoadError(err, "returned 2") {
		t.Errorf("install badabi: %v", err)
	}
	// A module failing the caller's check is refused too.
	var checked *Plugin
	check := func(ctx context.Context, p *Plugin) error {
		checked = p
		if _, err := p.Decide(ctx, decideInput("deposit", `{"amount":"1"}`)); err != nil {
			return err
		}
		return errors.Join(errors.New("determinism: outputs differ"), errors.New("replay: state differs"))
	}
	_, err := r.Install(t.Context(), guests["ledger2"], check)
	if !isLoadError(err, "check: determinism: outputs differ") || !isLoadError(err, "check: replay: state differs") {
		t.Errorf("install with a failing check: %v", err)
	}
	if cur, _ := r.Get("ledger"); cur != v1 {
		t.Errorf("current = %v, want the old version", cur)
	}
	if _, err := v1.Decide(t.Context(), decideInput("deposit", `{"amount":"1"}`)); err != nil {
		t.Errorf("the old version: %v", err)
	}
	r.Wait()
	if _, err := checked.Decide(t.Context(), decideInput("deposit", `{"amount":"1"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("the refused version is still open: %v", err)
	}
	// Installing the current bytes again changes nothing.
	if p := install(t, r, "ledger"); p != v1 {
		t.Errorf("reinstall returned %v", p)
	}
	if len(r.List()) != 1 || r.List()[0].Previous != nil {
		t.Errorf("List = %+v", r.List())
	}
}

func isLoadError(err error, reason string) bool {
	var le *LoadError
	return errors.As(err, &le) && strings.Contains(strings.Join(le.Reasons, "\n"), reason)
}

func TestRollback(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, Options{PoolSize: 1})
	ctx := t.Context()
	if _, err := r.Rollback(ctx, "ledger", nil); !errors.Is(err, ErrNoPrevious) {
		t.Errorf("rollback of nothing: %v", err)
	}
	install(t, r, "ledger")
	if _, err := r.Rollback(ctx, "ledger", nil); !errors.Is(err, ErrNoPrevious) {
		t.Errorf("rollback of a first version: %v", err)
	}
	install(t, r, "ledger2")
	version := func() string {
		p, _ := r.Get("ledger")
		res, err := p.Decide(ctx, decideInput("deposit", `{"amount":"1"}`))
		if err != nil {
			t.Fatal(err)
		}
		return pluginVersion(t, res)
	}
	if v := version(); v != "2.0.0" {
		t.Fatalf("installed %s", v)
	}
	var notified []string
	r.OnChange(func(name string, p *Plugin) { notified = append(notified, p.Description().Version) })
	p, err := r.Rollback(ctx, "ledger", nil)
	if err != nil || p.Description().Version != "1.0.0" || version() != "1.0.0" {
		t.Fatalf("rollback = %v, %v", p, err)
	}
	if l := r.List(); *l[0].Previous != "2.0.0" {
		t.Errorf("previous after rollback = %s", *l[0].Previous)
	}
	// Rolling back again returns to 2.0.0.
	if _, err := r.Rollback(ctx, "ledger", nil); err != nil || version() != "2.0.0" {
		t.Fatalf("second rollback: %v", err)
	}
	if strings.Join(notified, ",") != "1.0.0,2.0.0" {
		t.Errorf("OnChange saw %v", notified)
	}
}

// TestPrepareCommitDiscard: a prepared version serves only once
// committed, with the previous version the caller names (the store's),
// not the one it replaces; a discarded one is closed and changes
// nothing. A previous version the registry never ran is listed, but the
// registry has no bytes to roll back to it.
func TestPrepareCommitDiscard(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, Options{PoolSize: 1})
	v1 := install(t, r, "ledger")
	sha := func(name string) string {
		s := sha256.Sum256(guests[name])
		return hex.EncodeToString(s[:])
	}
	previous := func() string {
		if l := r.List(); len(l) == 1 && l[0].Previous != nil {
			return *l[0].Previous
		}
		return ""
	}

	p2, err := r.Prepare(t.Context(), guests["ledger2"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := r.Get("ledger"); cur != v1 {
		t.Fatal("a prepared version serves before it is committed")
	}
	r.Discard(p2)
	r.Wait()
	if _, err := p2.Decide(t.Context(), decideInput("deposit", `{"amount":"1"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("a discarded version is still open: %v", err)
	}
	if cur, _ := r.Get("ledger"); cur != v1 || previous() != "" {
		t.Fatalf("after a discard: current %v, previous %q", cur, previous())
	}
	// Discarding the current version (Prepare returns it for its bytes)
	// leaves it serving.
	same, err := r.Prepare(t.Context(), guests["ledger"], nil)
	if err != nil || same != v1 {
		t.Fatalf("prepare of the current bytes: %v, %v", same, err)
	}
	r.Discard(same)
	if _, err := v1.Decide(t.Context(), decideInput("deposit", `{"amount":"1"}`)); err != nil {
		t.Fatalf("the current version after discarding it: %v", err)
	}

	// Committed with a previous version the registry never ran.
	p3, err := r.Prepare(t.Context(), guests["ledger3"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Commit(p3, guests["ledger3"], sha("ledger2"), "2.0.0"); got != p3 {
		t.Fatalf("Commit returned %v", got)
	}
	if cur, _ := r.Get("ledger"); cur != p3 || previous() != "2.0.0" || r.Previous("ledger") != sha("ledger2") {
		t.Fatalf("after the commit: current %v, previous %q (%.12s)", cur, previous(), r.Previous("ledger"))
	}
	if r.Bytes("ledger", sha("ledger2")) != nil || r.Bytes("ledger", sha("ledger3")) == nil {
		t.Error("Bytes: want none for a version never run, the module for the current one")
	}
	if _, err := r.Rollback(t.Context(), "ledger", nil); !errors.Is(err, ErrNoPrevious) {
		t.Errorf("rollback without the previous version's bytes: %v", err)
	}
	// SetPrevious names the version 1.0.0 that ran here: its bytes are
	// kept no longer (it was replaced), so it is listed by the given name.
	r.SetPrevious("ledger", sha("ledger"), "1.0.0")
	if previous() != "1.0.0" || r.Previous("ledger") != sha("ledger") {
		t.Fatalf("after SetPrevious: previous %q", previous())
	}
	r.SetPrevious("ledger", "", "")
	if previous() != "" || r.Previous("ledger") != "" {
		t.Fatalf("after clearing the previous version: %q", previous())
	}
}

func TestRegistryListsPlugins(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, Options{PoolSize: 1})
	install(t, r, "notify")
	l := install(t, r, "ledger")
	if _, err := l.Decide(t.Context(), decideInput("deposit", `{"amount":"1"}`)); err != nil {
		t.Fatal(err)
	}
	list := r.List()
	if len(list) != 2 || list[0].Name != "ledger" || list[1].Name != "notify" {
		t.Fatalf("List = %+v", list)
	}
	if list[0].Kind != "ledger" || list[1].Kind != "subscription" || list[0].SHA256 != l.SHA256() ||
		list[0].Stats.Calls != 1 || list[0].LoadedAt <= 0 || list[0].Previous != nil {
		t.Errorf("List = %+v", list)
	}
	if _, ok := r.Get("nothing"); ok {
		t.Error("Get found a plugin never installed")
	}
}
