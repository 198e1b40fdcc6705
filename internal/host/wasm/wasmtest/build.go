// Package wasmtest builds the guest modules under internal/host/wasm/testdata/guests
// for tests and benchmarks: small plugins written against the ABI by hand
// (a ledger, a subscription, and deliberately broken ones).
//
// Builds go through internal/wasmbuild, the cache conformance.Build uses
// too, so repeated test runs do not rebuild.
package wasmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/factline/factline/internal/wasmbuild"
)

// Guest is one build: a directory under testdata/guests, extra linker
// flags (for example -X=main.version=2.0.0 for a second version) and
// build tags.
type Guest struct {
	Name    string
	LDFlags string
	Tags    string
}

// Guests are the guests the package knows, for documentation and tests.
var Guests = []string{"ledger", "notify", "trap", "loop", "hog", "badabi", "noexport", "baddescribe"}

// root returns internal/host/wasm, found from this file's location.
func root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("wasmtest: cannot locate the source tree")
	}
	return filepath.Dir(filepath.Dir(file)), nil
}

// Build builds the guests (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared,
// stripped) or finds them in the cache, and returns the paths of the
// .wasm files in the order given.
func Build(ctx context.Context, guests ...Guest) ([]string, error) {
	wasmDir, err := root()
	if err != nil {
		return nil, err
	}
	for _, gu := range guests {
		if !slices.Contains(Guests, gu.Name) {
			return nil, fmt.Errorf("wasmtest: unknown guest %q", gu.Name)
		}
	}
	paths := make([]string, len(guests))
	var g errgroup.Group
	g.SetLimit(4) // go list for the keys; the builds themselves take wasmbuild's slots
	for i, gu := range guests {
		g.Go(func() error {
			p, err := wasmbuild.Build(ctx, wasmbuild.Target{Dir: wasmDir, Package: "./testdata/guests/" + gu.Name,
				LDFlags: "-s -w " + gu.LDFlags, Tags: gu.Tags})
			if err != nil {
				return fmt.Errorf("wasmtest: guest %s: %w", gu.Name, err)
			}
			paths[i] = p
			return nil
		})
	}
	return paths, g.Wait()
}

// Read reads the built guests, in order.
func Read(paths []string) ([][]byte, error) {
	out := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// Precompile compiles the modules at paths into the compilation cache
// directory dir with a helper built without the race detector (see
// wasmtest/precompile), so that a race-built test loads them from the
// cache instead of compiling them fifteen times slower. deadline must
// match the host's (true unless Options.DisableDeadline).
func Precompile(ctx context.Context, dir string, deadline bool, paths ...string) error {
	wasmDir, err := root()
	if err != nil {
		return err
	}
	// wazero files its cache under its own version, which it reads from the
	// build info; a test binary has none ("dev"). The helper is built to
	// report the version this process reports, or its entries would land
	// in another directory.
	v := wazeroVersion()
	bin := filepath.Join(os.TempDir(), "factline-wasm-precompile-"+v)
	build := exec.CommandContext(ctx, wasmbuild.GoTool(), "build", "-trimpath", "-o", bin,
		"-ldflags=-X=github.com/tetratelabs/wazero/internal/version.version="+v, "./wasmtest/precompile")
	build.Dir = wasmDir
	build.Env = append(withoutRace(os.Environ()), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("wasmtest: build the precompile helper: %v\n%s", err, b)
	}
	args := append([]string{"-cache", dir, fmt.Sprintf("-deadline=%v", deadline)}, paths...)
	if b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("wasmtest: precompile: %v\n%s", err, b)
	}
	return nil
}

// wazeroVersion is what wazero's internal/version.GetWazeroVersion returns
// in this process.
func wazeroVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := ""
	for _, dep := range info.Deps {
		if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
			v = dep.Version
		}
	}
	if v == "" || v == "(devel)" {
		v = info.Main.Version
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}

// withoutRace drops -race from GOFLAGS: the helper exists to compile fast.
func withoutRace(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			var keep []string
			for _, f := range strings.Fields(v) {
				if f != "-race" {
					keep = append(keep, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(keep, " ")
		}
		out = append(out, kv)
	}
	return out
}
