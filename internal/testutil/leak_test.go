package testutil_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLeftGoroutine leaks a goroutine when run by TestMainFailsOnLeftGoroutines.
func TestLeftGoroutine(t *testing.T) {
	if os.Getenv("FACTLINE_TESTUTIL_LEAK") == "" {
		return
	}
	block := make(chan struct{})
	go func() { <-block }()
}

// TestMainFailsOnLeftGoroutines: a binary whose tests pass but leave a
// goroutine running fails in Main, naming it.
func TestMainFailsOnLeftGoroutines(t *testing.T) {
	t.Parallel()
	// The goroutine never ends: waiting the usual 15 s for it proves nothing.
	out, err := runChild("TestLeftGoroutine", "FACTLINE_TESTUTIL_LEAK=1", "FACTLINE_TESTUTIL_LEAK_WAIT=1s")
	if err == nil {
		t.Fatalf("the leaking binary passed:\n%s", out)
	}
	if !strings.Contains(string(out), "goroutines left running") || !strings.Contains(string(out), "TestLeftGoroutine") {
		t.Fatalf("the failure does not name the left goroutine:\n%s", out)
	}
}

// runChild runs one test of this binary in a child process, through its
// TestMain, with env added; it returns what the child printed.
func runChild(test string, env ...string) ([]byte, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}
