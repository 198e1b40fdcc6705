// Package wasmbuild builds Go packages to plugin modules (GOOS=wasip1
// GOARCH=wasm go build -buildmode=c-shared -trimpath) through one cache
// shared by every process on the machine. The SDK's conformance.Build and
// the host's test guests (internal/host/wasm/wasmtest) both build with it;
// it sits outside internal/host so that the SDK may import it.
package wasmbuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Slots is how many builds run at once on the machine, across processes
// (a test run builds plugins in several packages at a time).
const Slots = 2

// CacheDir is where Build keeps the modules it built.
func CacheDir() string { return filepath.Join(os.TempDir(), "factline-wasm-build") }

// Target is one build: the package Package ("." when empty), relative to
// the directory Dir the go command runs in, with optional linker flags and
// build tags.
type Target struct {
	Dir     string
	Package string
	LDFlags string
	Tags    string
}

// Build builds t, or finds it in CacheDir, and returns the path of the
// module. Modules are keyed by a hash of the Go version, the target, the
// main module's go.mod and go.sum (which pin every other dependency) and
// every source file of the main module the package depends on, so a rerun
// with unchanged sources builds nothing.
func Build(ctx context.Context, t Target) (string, error) {
	dir, err := filepath.Abs(t.Dir)
	if err != nil {
		return "", err
	}
	t.Dir = dir
	if t.Package == "" {
		t.Package = "."
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", err
	}
	key, err := sourceKey(ctx, t)
	if err != nil {
		return "", err
	}
	out := filepath.Join(CacheDir(), filepath.Base(filepath.Join(t.Dir, t.Package))+"-"+key+".wasm")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	unlock, err := lockSlot(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil { // another process built it meanwhile
		return out, nil
	}
	tmp, err := os.CreateTemp(CacheDir(), ".build-*.wasm")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := []string{"build", "-buildmode=c-shared", "-trimpath", "-o", tmp.Name()}
	if t.LDFlags != "" {
		args = append(args, "-ldflags="+t.LDFlags)
	}
	if t.Tags != "" {
		args = append(args, "-tags="+t.Tags)
	}
	cmd := exec.CommandContext(ctx, GoTool(), append(args, t.Package)...)
	cmd.Dir = t.Dir
	cmd.Env = wasmEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", filepath.Join(t.Dir, t.Package), err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

func wasmEnv() []string {
	return append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
}

var goVersion = sync.OnceValues(func() (string, error) {
	b, err := exec.Command(GoTool(), "env", "GOVERSION").Output()
	return strings.TrimSpace(string(b)), err
})

// sourceKey hashes what a build of t depends on.
func sourceKey(ctx context.Context, t Target) (string, error) {
	ver, err := goVersion()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	args := []string{"list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{.Dir}}{{range .GoFiles}}|{{.}}{{end}}{{range .EmbedFiles}}|{{.}}{{end}}{{end}}`}
	if t.Tags != "" {
		args = append(args, "-tags="+t.Tags)
	}
	cmd := exec.CommandContext(ctx, GoTool(), append(args, t.Package)...)
	cmd.Dir = t.Dir
	cmd.Env = wasmEnv()
	list, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w\n%s", err, ee.Stderr)
		}
		return "", fmt.Errorf("go list %s: %w", filepath.Join(t.Dir, t.Package), err)
	}
	gomod := exec.CommandContext(ctx, GoTool(), "env", "GOMOD")
	gomod.Dir = t.Dir
	modFile, err := gomod.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", ver, t.Dir)
	if t.Package != "." || t.LDFlags != "" || t.Tags != "" {
		// Only builds other than conformance.Build's hash these, so that
		// the modules it cached keep their keys.
		fmt.Fprintf(h, "%s\x00%s\x00%s\n", t.Package, t.LDFlags, t.Tags)
	}
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

// GoTool is $GO, else go (on the PATH).
func GoTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
