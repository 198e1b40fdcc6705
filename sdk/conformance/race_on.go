//go:build race

package conformance

// raceEnabled: the race detector makes each trip a guest makes into the
// host (one per loop iteration under close-on-context-done) about a
// hundred times slower, so a race-enabled build calls less by default.
const raceEnabled = true
