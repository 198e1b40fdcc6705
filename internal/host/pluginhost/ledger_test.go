package pluginhost_test

import (
	"testing"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/pluginhost"
	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/internal/teststore"
)

// TestCommandsListedOncePerLoadedVersion: every command request looks its
// route up in the ledger's commands, so Ledgers with a CommandCache lists
// a loaded version's commands once and answers the same list after that,
// without copying the plugin's description; a new version is listed anew.
func TestCommandsListedOncePerLoadedVersion(t *testing.T) {
	mods, cacheDir := buildGuests(t, wasmtest.Guest{Name: "ledger"},
		wasmtest.Guest{Name: "ledger", LDFlags: "-X=main.version=2.0.0"})
	m := newManager(t, teststore.Open(t, "sqlite"), cacheDir, "", nil)
	installAll(t, m, []string{"ledger"}, mods[:1])

	ledgers := pluginhost.Ledgers{Registry: m.Registry(), Commands: &pluginhost.CommandCache{}}
	commands := func() []ledger.CommandSpec {
		l, _ := ledgers.Ledger("ledger")
		return l.(ledger.Commander).Commands()
	}
	first := commands()
	if len(first) == 0 {
		t.Fatal("the ledger guest lists no commands")
	}
	if again := commands(); &again[0] != &first[0] {
		t.Error("a second request listed the same version's commands again")
	}
	// One allocation is the per-request ledger value itself.
	if n := fewestAllocs(func() { _ = commands() }); n > 1 {
		t.Errorf("listing a loaded version's commands allocates %.0f times per request, want at most 1", n)
	}

	// Every write asks whether the ledger's decisions read state; the
	// answer must not copy the description either.
	if n := fewestAllocs(func() {
		l, _ := ledgers.Ledger("ledger")
		_ = l.StateDependent()
	}); n > 1 {
		t.Errorf("asking a loaded ledger whether it is state dependent allocates %.0f times per request, want at most 1", n)
	}

	installAll(t, m, []string{"ledger"}, mods[1:])
	if swapped := commands(); &swapped[0] == &first[0] {
		t.Error("after version 2.0.0 was installed, the commands of the version before it were answered")
	}
}

// fewestAllocs is the fewest allocations per run of fn over three
// measurements. testing.AllocsPerRun counts every goroutine's
// allocations, and the host may still be filling an instance pool in the
// background right after an install; an allocation fn itself makes shows
// in every measurement.
func fewestAllocs(fn func()) float64 {
	fewest := testing.AllocsPerRun(100, fn)
	for range 2 {
		fewest = min(fewest, testing.AllocsPerRun(100, fn))
	}
	return fewest
}
