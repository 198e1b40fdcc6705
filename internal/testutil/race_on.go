//go:build race

package testutil

// Race reports whether the test binary runs with the race detector. It
// makes every memory access several times slower, so tests that check a
// throughput floor, or count at a scale that takes minutes under it, check
// that part in the non-race run make test also makes.
const Race = true
