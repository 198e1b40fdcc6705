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
	"github.com/factline/factline/internal/host/", // first: the one package prefix
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
	var own []string
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("the SDK depends on %s", dep)
			}
		}
		if strings.HasPrefix(dep, "github.com/factline/factline/") {
			own = append(own, dep)
		}
	}

	// go mod tidy in a plugin module also loads the tests of the packages
	// it imports, so what those tests import lands in the module's go.sum.
	args := append([]string{"list", "-deps", "-test"}, own...)
	out, err = exec.CommandContext(t.Context(), gotool, args...).Output()
	if err != nil {
		t.Fatalf("go list -test: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden[1:] { // modules only: these tests may use host test helpers
			if strings.HasPrefix(dep, f) {
				t.Errorf("the tests of the SDK's packages depend on %s", dep)
			}
		}
	}
}
