package conformance

import (
	"context"
	"fmt"
	"os"

	"github.com/factline/factline/internal/wasmbuild"
)

// BuildSlots is how many builds Build runs at once on the machine, across
// processes (a test run builds plugins in several packages at a time).
const BuildSlots = wasmbuild.Slots

// BuildCacheDir is where Build keeps the modules it built.
func BuildCacheDir() string { return wasmbuild.CacheDir() }

// Build builds the main package in dir (a directory; relative to the
// working directory, so "." in a plugin's own test) as a plugin module
// with the standard toolchain — GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared -trimpath — and returns the module.
//
// Modules are cached under BuildCacheDir, keyed by a hash of the Go
// version, the main module's go.mod and go.sum (which pin every other
// dependency) and every source file of the main module the package
// depends on, so a rerun with unchanged sources builds nothing.
func Build(ctx context.Context, dir string) ([]byte, error) {
	path, err := wasmbuild.Build(ctx, wasmbuild.Target{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	return os.ReadFile(path)
}
