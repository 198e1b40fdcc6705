package storetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var pluginTests = []test{
	{"SaveActivateRollback", testPluginSaveActivate},
	{"ConcurrentActivation", testPluginConcurrentActivation},
	{"ActivateReportsAChange", testPluginActivateReportsAChange},
	{"ActivateIfComparesTheActiveVersion", testPluginActivateIf},
	{"ConcurrentActivateIf", testPluginConcurrentActivateIf},
}

func testPluginSaveActivate(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	_, err := s.GetPluginVersion(ctx, "account", "aaa")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetPluginVersion of nothing: %v, want ErrNotFound", err)
	}
	if _, err := s.ActivatePlugin(ctx, "account", "aaa", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ActivatePlugin of an unstored version: %v, want ErrNotFound", err)
	}
	v1 := &store.PluginBinary{Name: "account", SHA256: "aaa", Version: "1.0.0", Wasm: []byte("\x00asm v1"), CreatedAt: 10}
	v2 := &store.PluginBinary{Name: "account", SHA256: "bbb", Version: "1.1.0", Wasm: []byte("\x00asm v2"), CreatedAt: 20}
	noErr(t, s.SavePluginVersion(ctx, v1), "SavePluginVersion v1")
	noErr(t, s.SavePluginVersion(ctx, v1), "SavePluginVersion v1 again is a no-op")
	noErr(t, s.SavePluginVersion(ctx, v2), "SavePluginVersion v2")
	got, err := s.GetPluginVersion(ctx, "account", "bbb")
	noErr(t, err, "GetPluginVersion")
	if got.Version != "1.1.0" || !bytes.Equal(got.Wasm, v2.Wasm) || got.CreatedAt != 20 {
		t.Fatalf("GetPluginVersion: %+v", got)
	}

	a, err := s.ActivatePlugin(ctx, "account", "aaa", 100)
	noErr(t, err, "activate v1")
	if a.SHA256 != "aaa" || a.Previous != "" || a.PreviousVersion != "" {
		t.Fatalf("first activation: %+v", a)
	}
	a, err = s.ActivatePlugin(ctx, "account", "bbb", 200)
	noErr(t, err, "activate v2")
	// The row names the previous version's own version string, so that
	// a process can list it without reading its binary.
	if a.Previous != "aaa" || a.PreviousVersion != "1.0.0" || a.UpdatedAt != 200 {
		t.Fatalf("second activation: %+v", a)
	}
	a, err = s.ActivatePlugin(ctx, "account", "bbb", 300)
	noErr(t, err, "re-activate v2")
	if a.Previous != "aaa" || a.PreviousVersion != "1.0.0" {
		t.Fatalf("re-activating the active version lost its history: %+v", a)
	}
	// Rollback is activating the previous version.
	a, err = s.ActivatePlugin(ctx, "account", a.Previous, 400)
	noErr(t, err, "rollback")
	if a.SHA256 != "aaa" || a.Previous != "bbb" || a.PreviousVersion != "1.1.0" {
		t.Fatalf("rollback: %+v", a)
	}
	noErr(t, s.SavePluginVersion(ctx, &store.PluginBinary{Name: "asset", SHA256: "ccc", Version: "0.1.0", Wasm: []byte{0}, CreatedAt: 1}), "save asset")
	_, err = s.ActivatePlugin(ctx, "asset", "ccc", 500)
	noErr(t, err, "activate asset")
	all, err := s.ActivePlugins(ctx)
	noErr(t, err, "ActivePlugins")
	if len(all) != 2 || all[0].Name != "account" || all[0].SHA256 != "aaa" || all[0].Previous != "bbb" || all[0].PreviousVersion != "1.1.0" ||
		all[1].Name != "asset" || all[1].Previous != "" || all[1].PreviousVersion != "" {
		t.Fatalf("ActivePlugins: %+v", all)
	}
	// A version of one plugin cannot be activated under another name.
	if _, err := s.ActivatePlugin(ctx, "asset", "aaa", 600); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cross-name activation: %v", err)
	}
}

func testPluginConcurrentActivation(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	shas := []string{"s1", "s2", "s3", "s4", "s5", "s6"}
	for i, sha := range shas {
		noErr(t, s.SavePluginVersion(ctx, &store.PluginBinary{Name: "p", SHA256: sha, Version: "v", Wasm: []byte{byte(i)}, CreatedAt: 1}), "save")
	}
	var wg sync.WaitGroup
	results := make([]*store.PluginActivation, len(shas))
	for i, sha := range shas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := s.ActivatePlugin(ctx, "p", sha, int64(i+1))
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = a
		}()
	}
	wg.Wait()
	// The activations form one chain: every version but the first names
	// a distinct previous one.
	prevs := map[string]bool{}
	empty := 0
	for _, a := range results {
		if a == nil {
			t.Fatal("missing result")
		}
		if a.Previous == "" {
			empty++
		} else if prevs[a.Previous] {
			t.Fatalf("two activations both replaced %s: %+v", a.Previous, results)
		} else {
			prevs[a.Previous] = true
		}
	}
	if empty != 1 {
		t.Fatalf("%d activations saw no previous version, want 1: %+v", empty, results)
	}
}

// savePlugins stores a version of plugin p for each sha.
func savePlugins(t *testing.T, s store.Store, shas ...string) {
	t.Helper()
	for i, sha := range shas {
		noErr(t, s.SavePluginVersion(t.Context(), &store.PluginBinary{Name: "p", SHA256: sha, Version: "v" + sha, Wasm: []byte{byte(i)}, CreatedAt: 1}), "save "+sha)
	}
}

// wantActive fails unless plugin p's stored row is active, previous.
func wantActive(t *testing.T, s store.Store, step, active, previous string) {
	t.Helper()
	all, err := s.ActivePlugins(t.Context())
	noErr(t, err, "ActivePlugins")
	if active == "" {
		if len(all) != 0 {
			t.Fatalf("%s: active rows %+v, want none", step, all)
		}
		return
	}
	if len(all) != 1 || all[0].SHA256 != active || all[0].Previous != previous {
		t.Fatalf("%s: active rows %+v, want %s after %q", step, all, active, previous)
	}
}

// testPluginActivateReportsAChange: an activation says whether it changed
// the active version, which is what an install answers (201 or 200), not
// what the process that asked served.
func testPluginActivateReportsAChange(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	savePlugins(t, s, "aaa", "bbb")
	for _, step := range []struct {
		sha     string
		changed bool
	}{{"aaa", true}, {"aaa", false}, {"bbb", true}, {"bbb", false}, {"aaa", true}} {
		a, err := s.ActivatePlugin(ctx, "p", step.sha, 1)
		noErr(t, err, "activate "+step.sha)
		if a.Changed != step.changed || a.SHA256 != step.sha {
			t.Fatalf("activating %s: %+v, want changed %v", step.sha, a, step.changed)
		}
	}
	a, err := s.ActivatePluginIf(ctx, "p", "aaa", "aaa", 2)
	noErr(t, err, "conditional activation of the active version")
	if a.Changed || a.Previous != "bbb" || a.PreviousVersion != "vbbb" || a.UpdatedAt != 1 {
		t.Fatalf("conditional activation of the active version: %+v, want it unchanged, bbb before it", a)
	}
	a, err = s.ActivatePluginIf(ctx, "p", "bbb", "aaa", 3)
	noErr(t, err, "conditional activation")
	if !a.Changed || a.Previous != "aaa" || a.PreviousVersion != "vaaa" || a.UpdatedAt != 3 {
		t.Fatalf("conditional activation: %+v, want changed, aaa before it", a)
	}
}

// testPluginActivateIf: a conditional activation writes only while the
// active version is the expected one ("" for none) and otherwise fails
// with ErrVersionConflict, changing nothing: a rollback that read the
// active version before another process installed one does not undo
// that install.
func testPluginActivateIf(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	savePlugins(t, s, "aaa", "bbb", "ccc")

	if _, err := s.ActivatePluginIf(ctx, "p", "aaa", "bbb", 1); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("expecting a version of a plugin with none active: %v, want ErrVersionConflict", err)
	}
	wantActive(t, s, "after the refused first activation", "", "")
	if _, err := s.ActivatePluginIf(ctx, "p", "zzz", "", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("conditional activation of an unstored version: %v, want ErrNotFound", err)
	}
	a, err := s.ActivatePluginIf(ctx, "p", "aaa", "", 1)
	noErr(t, err, "first activation expecting none")
	if !a.Changed || a.Previous != "" {
		t.Fatalf("first activation expecting none: %+v", a)
	}
	if _, err := s.ActivatePluginIf(ctx, "p", "bbb", "", 2); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("expecting none while aaa is active: %v, want ErrVersionConflict", err)
	}
	if _, err := s.ActivatePluginIf(ctx, "p", "bbb", "ccc", 2); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("expecting ccc while aaa is active: %v, want ErrVersionConflict", err)
	}
	wantActive(t, s, "after the refused activations", "aaa", "")
	a, err = s.ActivatePluginIf(ctx, "p", "bbb", "aaa", 3)
	noErr(t, err, "activation expecting the active version")
	if !a.Changed || a.Previous != "aaa" {
		t.Fatalf("activation expecting the active version: %+v", a)
	}

	// The audit's race: a rollback read bbb active, aaa before it; another
	// process installs ccc; the rollback's activation of aaa, expecting
	// bbb, must not undo the install (ending at aaa with ccc before it).
	_, err = s.ActivatePlugin(ctx, "p", "ccc", 4)
	noErr(t, err, "the other process's install")
	if _, err := s.ActivatePluginIf(ctx, "p", "aaa", "bbb", 5); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("rollback overlapping an install: %v, want ErrVersionConflict", err)
	}
	wantActive(t, s, "after the overlapping rollback", "ccc", "bbb")
}

// testPluginConcurrentActivateIf: of conditional activations at once, all
// expecting the same active version, exactly one wins: the comparison and
// the write are one step.
func testPluginConcurrentActivateIf(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	shas := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6"}
	savePlugins(t, s, shas...)
	_, err := s.ActivatePlugin(ctx, "p", "s0", 1)
	noErr(t, err, "activate s0")
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		won       []string
		conflicts int
	)
	for _, sha := range shas[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.ActivatePluginIf(ctx, "p", sha, "s0", 2)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, sha)
			case errors.Is(err, store.ErrVersionConflict):
				conflicts++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 || conflicts != len(shas)-2 {
		t.Fatalf("%d activations expecting s0 won (%v), %d conflicted; want 1 and %d", len(won), won, conflicts, len(shas)-2)
	}
	wantActive(t, s, "after the concurrent activations", won[0], "s0")
}
