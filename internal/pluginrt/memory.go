package pluginrt

import "github.com/tetratelabs/wazero/experimental"

// linearMemory is the allocator of every instance's linear memory. By
// default wazero grows a memory by appending to a Go slice: each
// memory.grow may copy the whole memory to a new array and zero the new
// capacity, and a Go guest's runtime grows its memory many times in
// _initialize. That copying was the largest cost of making an instance.
// Where the platform allows it (memory_unix.go), the memory is instead
// one anonymous mapping of the maximum size, reserved but not committed:
// growing is only a longer slice of it, and pages cost something only
// once the guest touches them.
var linearMemory experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(allocateMemory)

func allocateMemory(capBytes, maxBytes uint64) experimental.LinearMemory {
	if m := mapMemory(maxBytes); m != nil {
		return m
	}
	return &heapMemory{buf: make([]byte, 0, capBytes), max: maxBytes}
}

// heapMemory is wazero's own behaviour, the fallback where a mapping
// cannot be made: a Go slice grown by append.
type heapMemory struct {
	buf []byte
	max uint64
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	switch n := uint64(len(m.buf)); {
	case size > m.max:
		return nil
	case size <= uint64(cap(m.buf)):
		// Bytes between len and cap were zeroed when allocated and, being
		// outside the memory, never written since.
		m.buf = m.buf[:size]
	default:
		m.buf = append(m.buf, make([]byte, size-n)...)
	}
	return m.buf
}

func (m *heapMemory) Free() { m.buf = nil }
