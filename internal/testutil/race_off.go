//go:build !race

package testutil

// Race reports whether the test binary runs with the race detector (see
// race_on.go).
const Race = false
