package testutil_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factline/factline/internal/testutil"
)

// TestMakeTempDir creates a binary-lifetime directory and prints its path
// when run by TestTempDirRemovedByMain.
func TestMakeTempDir(t *testing.T) {
	if os.Getenv("FACTLINE_TESTUTIL_TEMPDIR") == "" {
		return
	}
	dir, err := testutil.TempDir("factline-testutil-tempdir-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Println("tempdir=" + dir)
}

// TestTempDirRemovedByMain: a directory from TempDir outlives the test that
// made it and is gone, contents and all, once the binary's Main returns
// (which exits the process, so a deferred RemoveAll would not run).
func TestTempDirRemovedByMain(t *testing.T) {
	t.Parallel()
	out, err := runChild("TestMakeTempDir", "FACTLINE_TESTUTIL_TEMPDIR=1")
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "tempdir=")
	if !ok {
		t.Fatalf("the child printed no directory:\n%s", out)
	}
	dir, _, _ := strings.Cut(rest, "\n")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		os.RemoveAll(dir)
		t.Fatalf("%s still there after the child's Main: %v", dir, err)
	}
}
