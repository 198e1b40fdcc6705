package app_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/wasm"
)

// cacheEntries lists the files of a compilation cache directory.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestPrecompiledPluginsLoadFromTheCache: a module precompiled by the
// helper is served from the cache to the host of this (race-built) test
// binary, which compiles nothing and writes no entry of its own, so the
// apps of the tests load the plugins without compiling them.
func TestPrecompiledPluginsLoadFromTheCache(t *testing.T) {
	t.Parallel()
	module := repoPlugins(t)["account"]
	dir := t.TempDir()
	if err := precompileInto(dir, module); err != nil {
		t.Fatal(err)
	}
	before := cacheEntries(t, dir)
	if len(before) != 1 {
		t.Fatalf("precompiled cache holds %v, want one entry", before)
	}
	h, err := wasm.NewHost(wasm.Options{CacheDir: dir, CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	if _, err := h.Load(t.Context(), module); err != nil {
		t.Fatal(err)
	}
	if after := cacheEntries(t, dir); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("the host compiled the module again: cache %v, precompiled %v", after, before)
	}
}
