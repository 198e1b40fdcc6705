package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of a Chromium binary for browser tests,
// installing Debian's chromium package with apt-get when it is missing
// (as root), like the PostgreSQL and Redis helpers. FACTLINE_TEST_CHROMIUM
// names a binary to use instead.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FACTLINE_TEST_CHROMIUM"); p != "" {
		return p
	}
	p, err := ensureInstalled("chromium", chromiumPath)
	if err != nil {
		t.Fatalf("testutil: Chromium: %v", err)
	}
	return p
}

// chromiumPath finds chromium on the PATH or where Debian installs it.
func chromiumPath() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	for _, p := range []string{"/usr/bin/chromium", "/usr/lib/chromium/chromium"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium not found on PATH")
}
