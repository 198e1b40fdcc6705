//go:build linux || darwin || freebsd

package pluginrt

import (
	"math"
	"syscall"
)

// mappedMemory is a linear memory in an anonymous private mapping of its
// maximum size, made without reserving swap: the kernel commits (and
// zeroes) a page when the guest first touches it, and the memory never
// moves, so growing it copies nothing.
type mappedMemory struct {
	mapping []byte
}

// mapMemory maps maxBytes, or returns nil (the caller falls back to a Go
// slice) when the mapping cannot be made.
func mapMemory(maxBytes uint64) *mappedMemory {
	if maxBytes == 0 || maxBytes > math.MaxInt {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(maxBytes), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return &mappedMemory{mapping: b}
}

// Reallocate returns the first size bytes of the mapping (nil past its
// end: the grow fails and the guest sees memory.grow return -1). The
// capacity is cut to size so that nothing appends into the rest.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.mapping)) {
		return nil
	}
	return m.mapping[:size:size]
}

// Free unmaps the memory. wazero calls it once, when the instance closes,
// never while the instance runs.
func (m *mappedMemory) Free() {
	if m.mapping != nil {
		_ = syscall.Munmap(m.mapping)
		m.mapping = nil
	}
}
