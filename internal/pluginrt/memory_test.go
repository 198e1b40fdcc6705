package pluginrt

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// TestInstanceMemoryGrowsInPlace: an instance's linear memory does not
// move when it grows (no copy of what the guest has written so far), keeps
// its contents, and stops at the memory cap.
func TestInstanceMemoryGrowsInPlace(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1, MemoryLimitMiB: 32})
	p := load(t, h, "ledger")
	in := peek(t, p)
	mem := in.mem
	before, ok := mem.Read(0, mem.Size())
	if !ok {
		t.Fatal("read the memory")
	}
	copy(before[len(before)-4:], "mark")
	maxPages := uint32(32 * 16)
	pages, ok := mem.Grow(maxPages - mem.Size()/65536)
	if !ok {
		t.Fatalf("grow from %d pages to the cap of %d refused", pages, maxPages)
	}
	after, _ := mem.Read(0, mem.Size())
	if unsafe.SliceData(after) != unsafe.SliceData(before) {
		t.Errorf("the memory moved when it grew from %d to %d pages", pages, maxPages)
	}
	if !bytes.Equal(after[len(before)-4:len(before)], []byte("mark")) {
		t.Error("the memory lost its contents when it grew")
	}
	if tail := after[len(before):]; !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Error("the grown part of the memory is not zero")
	}
	if _, ok := mem.Grow(1); ok {
		t.Error("grew past the memory cap")
	}
	if _, err := p.Decide(t.Context(), decideInput("deposit", `{"amount":"1.00"}`)); err != nil {
		t.Fatalf("decide after the memory grew: %v", err)
	}
}

// TestLinearMemoryAllocators: both memories (a mapping, and the Go slice
// used where a mapping cannot be made) grow up to their maximum, zeroed,
// keeping what was written, and refuse to grow past it.
func TestLinearMemoryAllocators(t *testing.T) {
	const page = 65536
	for _, tc := range []struct {
		name string
		mem  func(capBytes, maxBytes uint64) experimental.LinearMemory
	}{
		{"default", linearMemory.Allocate},
		{"go slice", func(c, m uint64) experimental.LinearMemory { return &heapMemory{buf: make([]byte, 0, c), max: m} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.mem(page, 8*page)
			defer m.Free()
			b := m.Reallocate(page)
			if len(b) != page {
				t.Fatalf("len %d, want %d", len(b), page)
			}
			b[page-1] = 7
			for _, size := range []uint64{2 * page, 3 * page, 8 * page} {
				b = m.Reallocate(size)
				if uint64(len(b)) != size {
					t.Fatalf("len %d, want %d", len(b), size)
				}
				if b[page-1] != 7 {
					t.Fatalf("grown to %d bytes: contents lost", size)
				}
				if tail := b[page:]; !bytes.Equal(tail, make([]byte, len(tail))) {
					t.Fatalf("grown to %d bytes: the new part is not zero", size)
				}
			}
			if m.Reallocate(9*page) != nil {
				t.Error("grew past the maximum")
			}
		})
	}
}

// TestTrapErrorNamesAMemoryCapNearlyReached: a call stopped by the
// deadline with its instance's memory within an eighth of the cap says it
// was most likely running out of memory (a Go guest's collector runs ever
// more often there); one stopped with room to spare, or one that trapped,
// says nothing of memory.
func TestTrapErrorNamesAMemoryCapNearlyReached(t *testing.T) {
	const hint = "most likely running out of memory"
	for _, tc := range []struct {
		name string
		err  TrapError
		want bool
	}{
		{"timeout at the cap", TrapError{Timeout: true, Memory: 64 << 20, MemoryCap: 64 << 20}, true},
		{"timeout an eighth below", TrapError{Timeout: true, Memory: 56 << 20, MemoryCap: 64 << 20}, true},
		{"timeout with room", TrapError{Timeout: true, Memory: 30 << 20, MemoryCap: 64 << 20}, false},
		{"trap at the cap", TrapError{Memory: 64 << 20, MemoryCap: 64 << 20}, false},
		{"no cap known", TrapError{Timeout: true, Memory: 64 << 20}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.err.Plugin, tc.err.Call, tc.err.Cause = "p@1", "decide", context.DeadlineExceeded
			if got := strings.Contains(tc.err.Error(), hint); got != tc.want {
				t.Fatalf("%q: says %q %v, want %v", tc.err.Error(), hint, got, tc.want)
			}
		})
	}
}
