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
	results := make([]*store.ActivePlugin, len(shas))
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
