package wasmbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module writes a one-package plugin module to a temporary directory.
func module(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example.com/guest\n\ngo 1.24\n",
		"main.go": "package main\n\nvar version = \"1\"\n\nfunc main() {}\n",
		"tag.go":  "//go:build extra\n\npackage main\n\nvar extra = true\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func build(t *testing.T, tg Target) string {
	t.Helper()
	p, err := Build(t.Context(), tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	return p
}

// A second build of unchanged sources is the cached module; a changed
// source, other linker flags or other tags are another module.
func TestBuildCachesUntilTheInputsChange(t *testing.T) {
	t.Parallel()
	dir := module(t)
	first := build(t, Target{Dir: dir})
	st, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if again := build(t, Target{Dir: dir, Package: "."}); again != first {
		t.Fatalf("rebuild of unchanged sources: %s, want the cached %s", again, first)
	}
	if st2, err := os.Stat(first); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("cached module rewritten: %v", err)
	}
	seen := map[string]string{first: "first build"}
	for _, tc := range []struct {
		name string
		tg   Target
	}{
		{"linker flags", Target{Dir: dir, LDFlags: "-X=main.version=2"}},
		{"build tags", Target{Dir: dir, Tags: "extra"}},
	} {
		p := build(t, tc.tg)
		if prev, ok := seen[p]; ok {
			t.Errorf("%s: same module as %s (%s)", tc.name, prev, p)
		}
		seen[p] = tc.name
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nvar version = \"3\"\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := build(t, Target{Dir: dir}); seen[p] != "" {
		t.Errorf("changed source: same module as %s (%s)", seen[p], p)
	}
}

// A package that does not compile is an error naming it, with the
// compiler's output.
func TestBuildReportsCompileErrors(t *testing.T) {
	t.Parallel()
	dir := module(t)
	if err := os.WriteFile(filepath.Join(dir, "bad.go"), []byte("package main\n\nvar broken = undefined\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(t.Context(), Target{Dir: dir})
	if err == nil {
		t.Fatal("nil error")
	}
	if got := err.Error(); !strings.Contains(got, dir) || !strings.Contains(got, "undefined") {
		t.Errorf("error %q does not name the package and the compiler's complaint", got)
	}
}
