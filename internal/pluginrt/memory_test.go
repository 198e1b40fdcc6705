package pluginrt

import (
	"bytes"
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
