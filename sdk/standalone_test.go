package sdk_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// forbidden are the import path prefixes the SDK must not depend on: the
// gateway, and the libraries only the gateway needs. A plugin module that
// requires only the SDK then builds and runs its conformance test without
// them.
var forbidden = []string{
	"github.com/factline/factline/internal/host/",
	"github.com/prometheus/",
	"github.com/gofiber/",
	"github.com/valyala/",
	"github.com/jackc/",
	"github.com/redis/",
	"modernc.org/",
}

func TestSDKImportsNoHostPackage(t *testing.T) {
	t.Parallel()
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.CommandContext(t.Context(), gotool, "list", "-deps", "github.com/factline/factline/sdk/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list listed %d packages: %q", len(deps), out)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("the SDK depends on %s", dep)
			}
		}
	}
}
