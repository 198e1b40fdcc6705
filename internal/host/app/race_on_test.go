//go:build race

package app_test

// raceEnabled: the race detector slows every call several times over, so
// throughput floors are checked by the non-race run of the same test
// (make test runs it).
const raceEnabled = true
