package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/factline/factline/sdk/conformance"
)

// TestPluginVersionThatBreaksTheModelIsRefused: a new version of a ledger
// plugin that no longer serves an entity type the domain model gives it,
// or lacks a command a served route calls, is refused with every reason
// (422), and the version being served keeps serving; without the check
// every request on the type failed once it was swapped in.
func TestPluginVersionThatBreaksTheModelIsRefused(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, fixture(t, "points")); code != 201 {
		t.Fatalf("install points 1.0.0: %d %v", code, body)
	}
	if code, body := l.putDomain("loyalty", loyaltyDomain); code != 201 {
		t.Fatalf("domain: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "member", "id": "m1"}); code != 201 {
		t.Fatalf("create member: %d %v", code, body)
	}
	v2, err := conformance.Build(context.Background(), "testdata/points2")
	if err != nil {
		t.Fatal(err)
	}
	precompile(t, v2)
	code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, v2)
	errs := fmt.Sprint(body["errors"])
	if code != 422 || !strings.Contains(errs, "the domain model gives entity type member to ledger points, and this version serves only reward") ||
		!strings.Contains(errs, `domain/loyalty:13:`) || !strings.Contains(errs, `has no command "earn"`) {
		t.Fatalf("a version that drops the served type and command: %d %v", code, body)
	}
	if code, body := l.call("POST", "/api/members/m1/earn", l.key, map[string]any{"points": 2}); code != 201 || dataOf(body)["type"] != "earned" {
		t.Fatalf("the served version after the refusal: %d %v", code, body)
	}
	code, body = l.call("GET", "/v1/admin/plugins", l.op, nil)
	if code != 200 || !strings.Contains(fmt.Sprint(body), "name:points") || !strings.Contains(fmt.Sprint(body), "version:1.0.0") {
		t.Fatalf("plugins after the refusal: %d %v", code, body)
	}
}
