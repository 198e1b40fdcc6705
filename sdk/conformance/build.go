package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// BuildSlots is how many builds Build runs at once on the machine, across
// processes (a test run builds plugins in several packages at a time).
const BuildSlots = 2

// BuildCacheDir is where Build keeps the modules it built.
func BuildCacheDir() string { return filepath.Join(os.TempDir(), "factline-wasm-build") }

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
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(BuildCacheDir(), 0o755); err != nil {
		return nil, err
	}
	key, err := sourceKey(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(BuildCacheDir(), filepath.Base(dir)+"-"+key+".wasm")
	if b, err := os.ReadFile(out); err == nil {
		return b, nil
	}
	unlock, err := lockSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if b, err := os.ReadFile(out); err == nil { // another process built it meanwhile
		return b, nil
	}
	tmp, err := os.CreateTemp(BuildCacheDir(), ".build-*.wasm")
	if err != nil {
		return nil, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(ctx, goTool(), "build", "-buildmode=c-shared", "-trimpath", "-o", tmp.Name(), ".")
	cmd.Dir = dir
	cmd.Env = wasmEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("conformance: build %s: %v\n%s", dir, err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

func wasmEnv() []string {
	return append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
}

var goVersion = sync.OnceValues(func() (string, error) {
	b, err := exec.Command(goTool(), "env", "GOVERSION").Output()
	return strings.TrimSpace(string(b)), err
})

// sourceKey hashes what a build of the package in dir depends on.
func sourceKey(ctx context.Context, dir string) (string, error) {
	ver, err := goVersion()
	if err != nil {
		return "", fmt.Errorf("conformance: go env GOVERSION: %w", err)
	}
	cmd := exec.CommandContext(ctx, goTool(), "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{.Dir}}{{range .GoFiles}}|{{.}}{{end}}{{range .EmbedFiles}}|{{.}}{{end}}{{end}}`, ".")
	cmd.Dir = dir
	cmd.Env = wasmEnv()
	list, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w\n%s", err, ee.Stderr)
		}
		return "", fmt.Errorf("conformance: go list %s: %w", dir, err)
	}
	gomod := exec.CommandContext(ctx, goTool(), "env", "GOMOD")
	gomod.Dir = dir
	modFile, err := gomod.Output()
	if err != nil {
		return "", fmt.Errorf("conformance: go env GOMOD: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", ver, dir)
	if mf := strings.TrimSpace(string(modFile)); mf != "" && mf != os.DevNull {
		for _, f := range []string{mf, strings.TrimSuffix(mf, ".mod") + ".sum"} {
			b, _ := os.ReadFile(f)
			h.Write(b)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		fields := strings.Split(line, "|")
		for _, name := range fields[1:] {
			b, err := os.ReadFile(filepath.Join(fields[0], name))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", filepath.Join(fields[0], name), len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
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
