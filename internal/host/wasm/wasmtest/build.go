// Package wasmtest builds the guest modules under internal/host/wasm/testdata/guests
// for tests and benchmarks: small plugins written against the ABI by hand
// (a ledger, a subscription, and deliberately broken ones).
//
// Builds are cached under the temporary directory, keyed by a hash of
// every guest source, the ABI package and the Go version, so repeated test
// runs do not rebuild; at most two builds run at once.
package wasmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
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

var (
	keyOnce sync.Once
	key     string
	keyErr  error
)

// sourceKey hashes every input of a build: the guests and their kit, the
// ABI package and the Go toolchain's version. (The guests use nothing
// else, so changes to go.mod do not rebuild them.)
func sourceKey(ctx context.Context, wasmDir string) (string, error) {
	keyOnce.Do(func() {
		h := sha256.New()
		out, err := exec.CommandContext(ctx, goTool(), "version").Output()
		if err != nil {
			keyErr = fmt.Errorf("wasmtest: go version: %w", err)
			return
		}
		h.Write(out)
		modRoot := filepath.Dir(filepath.Dir(filepath.Dir(wasmDir))) // internal/host/wasm
		for _, dir := range []string{filepath.Join(wasmDir, "testdata", "guests"), filepath.Join(modRoot, "sdk", "abi")} {
			err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
					return err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(modRoot, path)
				fmt.Fprintf(h, "%s %d\n", rel, len(b))
				h.Write(b)
				return nil
			})
			if err != nil {
				keyErr = fmt.Errorf("wasmtest: hash sources: %w", err)
				return
			}
		}
		key = hex.EncodeToString(h.Sum(nil))[:24]
	})
	return key, keyErr
}

// Build builds the guests (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared)
// or finds them in the cache, and returns the paths of the .wasm files in
// the order given.
func Build(ctx context.Context, guests ...Guest) ([]string, error) {
	wasmDir, err := root()
	if err != nil {
		return nil, err
	}
	k, err := sourceKey(ctx, wasmDir)
	if err != nil {
		return nil, err
	}
	cacheDir := filepath.Join(os.TempDir(), "factline-wasm-guests")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	for _, gu := range guests {
		if !slices.Contains(Guests, gu.Name) {
			return nil, fmt.Errorf("wasmtest: unknown guest %q", gu.Name)
		}
	}
	paths := make([]string, len(guests))
	var g errgroup.Group
	g.SetLimit(2)
	for i, gu := range guests {
		fh := sha256.Sum256([]byte(k + "\x00" + gu.Name + "\x00" + gu.LDFlags + "\x00" + gu.Tags))
		paths[i] = filepath.Join(cacheDir, gu.Name+"-"+hex.EncodeToString(fh[:8])+".wasm")
		if _, err := os.Stat(paths[i]); err == nil {
			continue
		}
		g.Go(func() error { return build(ctx, wasmDir, gu, paths[i]) })
	}
	return paths, g.Wait()
}

func build(ctx context.Context, wasmDir string, g Guest, out string) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".build-*.wasm")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := []string{"build", "-buildmode=c-shared", "-trimpath", "-o", tmp.Name(), "-ldflags=-s -w " + g.LDFlags}
	if g.Tags != "" {
		args = append(args, "-tags="+g.Tags)
	}
	args = append(args, "./testdata/guests/"+g.Name)
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = wasmDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("wasmtest: build guest %s: %v\n%s", g.Name, err, b)
	}
	return os.Rename(tmp.Name(), out)
}

// goTool is $GO, else go on the PATH, else the toolchain's own.
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
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
	build := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-o", bin,
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
