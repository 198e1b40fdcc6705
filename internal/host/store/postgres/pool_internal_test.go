package postgres

import (
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/factline/factline/internal/testutil"
)

func TestAutoMaxConns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		procs, available int
		want             int32
	}{
		{1, 0, 16},      // 16 per CPU, no known cap
		{2, 0, 32},      // the 2-core machine: no longer 10
		{2, 297, 32},    // a quarter of 297 is 74: no cap
		{8, 97, 24},     // PostgreSQL's default max_connections: a quarter of 100 - 3
		{2, 20, 5},      // a small server: a quarter even under the floor
		{2, 3, 1},       // never zero
		{0, 0, 10},      // the floor
		{64, 1000, 250}, // many cores: the server's limit
	} {
		if got := AutoMaxConns(c.procs, c.available); got != c.want {
			t.Errorf("AutoMaxConns(%d, %d) = %d, want %d", c.procs, c.available, got, c.want)
		}
	}
}

// TestOpenSizesPool: with MaxConns zero the pool follows GOMAXPROCS, then
// the server's connection limit once the cores ask for more than a
// quarter of it; an explicit MaxConns wins. Not parallel: it changes
// GOMAXPROCS.
func TestOpenSizesPool(t *testing.T) {
	ctx := t.Context()
	url := testutil.Postgres(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func(opts Options) *Store {
		t.Helper()
		opts.Logger = quiet
		s, err := Open(ctx, url, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(Options{})
	available := availableConns(ctx, s.pool.Pool)
	if available <= 0 {
		t.Fatalf("the server's available connections: %d", available)
	}
	if got, want := s.MaxConns(), AutoMaxConns(runtime.GOMAXPROCS(0), available); got != want {
		t.Errorf("pool of %d connections at GOMAXPROCS %d, want %d", got, runtime.GOMAXPROCS(0), want)
	}
	if got := open(Options{MaxConns: 3}).MaxConns(); got != 3 {
		t.Errorf("MaxConns 3: pool of %d", got)
	}

	// Enough cores to ask for more than a quarter of the server.
	procs := available/ConnsPerCPU + 1
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	if got, want := open(Options{}).MaxConns(), int32(available/4); got != want {
		t.Errorf("pool of %d connections at GOMAXPROCS %d on a server of %d, want %d", got, procs, available, want)
	}
}
