//go:build !linux && !darwin && !freebsd

package pluginrt

// Elsewhere every memory is a Go slice.
type mappedMemory = heapMemory

func mapMemory(uint64) *mappedMemory { return nil }
