package pluginhost_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/pluginhost"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// unstoringStore fails plugin writes while down, counting them.
type unstoringStore struct {
	store.Store
	down    atomic.Bool
	refused atomic.Int32
}

func (s *unstoringStore) SavePluginVersion(ctx context.Context, p *store.PluginBinary) error {
	if s.down.Load() {
		s.refused.Add(1)
		return fmt.Errorf("save plugin: %w", store.ErrUnavailable)
	}
	return s.Store.SavePluginVersion(ctx, p)
}

// TestDirFileNotStoredIsTriedAgain: a file that appears in the plugins
// directory while the database cannot be reached is loaded once it can.
// It had been marked seen before the install, which since stores a
// version before it serves it, so it was never tried again.
func TestDirFileNotStoredIsTriedAgain(t *testing.T) {
	ctx := t.Context()
	mods, cacheDir := buildGuests(t, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ledger.wasm"), mods[0], 0o644); err != nil {
		t.Fatal(err)
	}
	st := &unstoringStore{Store: teststore.Open(t, "sqlite")}
	m := newManagerOpts(t, st, cacheDir, pluginhost.Options{Dir: dir, Poll: 20 * time.Millisecond})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := m.WaitLoaded(wctx); err != nil {
		t.Fatal(err)
	}
	st.down.Store(true)
	if err := os.WriteFile(filepath.Join(dir, "ledger.wasm"), mods[1], 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNil(t, time.Minute, func() error {
		if st.refused.Load() == 0 {
			return fmt.Errorf("the new file was not tried while the store was down")
		}
		return nil
	})
	if v := serving(m, "ledger"); v != "1.0.0" {
		t.Fatalf("serving %q while the new version could not be stored, want 1.0.0", v)
	}
	st.down.Store(false)
	testutil.EventuallyNil(t, time.Minute, func() error {
		if v := serving(m, "ledger"); v != "2.0.0" {
			return fmt.Errorf("serving %q once the store is back, want 2.0.0", v)
		}
		return nil
	})
}
