package app_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/testutil"
)

// TestRestartWithoutADomainFileWarnsOfItsStoredTypes: a process started
// without the --domain file that declared a type stored entities have
// says so in its log, and writes to those entities answer 400 naming the
// entity (not 500); their facts can still be read.
func TestRestartWithoutADomainFileWarnsOfItsStoredTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, layer := filepath.Join(dir, "data"), filepath.Join(dir, "claims.yaml")
	if err := os.WriteFile(layer, []byte(claimsLayer), 0o644); err != nil {
		t.Fatal(err)
	}
	first := startLive(t, "sqlite", data, func(c *app.Config) { c.Domains = []string{layer} })
	for _, id := range []string{"c1", "c2"} {
		if code, body := first.call("POST", "/v1/entities", first.key, map[string]any{"type": "claim", "id": id, "status": "open"}); code != 201 {
			t.Fatalf("create claim %s: %d %v", id, code, body)
		}
	}
	if code, body := first.call("POST", "/v1/facts", first.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
		t.Fatalf("fact on a claim: %d %v", code, body)
	}
	createAccount(first, "a1")
	first.stop()

	logs := &testutil.Logs{}
	second := startLive(t, "sqlite", data, func(c *app.Config) { c.Logger = logs.Logger() })
	testutil.Eventually(t, 30*time.Second, "the warning of undeclared types", func() bool {
		return logs.Contains("stored entities have types no domain manifest declares")
	})
	if !logs.Contains(`types="[claim (2 entities)]"`) {
		t.Errorf("the warning does not list claim alone with its count:\n%s", logs.String())
	}
	code, body := second.call("POST", "/v1/facts", second.key, map[string]any{"entity_id": "c1", "type": "filed"})
	const want = "Unknown entity type: claim (the type of entity c1, which no domain manifest declares now)"
	if code != 400 || body["detail"] != want {
		t.Errorf("fact on a claim: %d %v, want 400 %q", code, body, want)
	}
	code, body = second.call("GET", "/v1/entities/c1/facts", second.key, nil)
	if items, _ := dataOf(body)["items"].([]any); code != 200 || len(items) != 1 {
		t.Errorf("facts of a claim: %d %v, want the one fact", code, body)
	}
}
