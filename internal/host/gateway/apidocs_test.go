package gateway_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
)

// undocumented lists the routes the server registers that /openapi.json
// does not describe, as "METHOD /path".
func undocumented(t *testing.T, srv *gateway.Server, skip func(method, path string) bool) []string {
	t.Helper()
	resp, err := srv.App().Test(mustRequest("GET", "/openapi.json"), 5000)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/openapi.json: %v %v", resp, err)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(readAll(resp)), &doc); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, r := range srv.App().GetRoutes(true) {
		if skip(r.Method, r.Path) {
			continue
		}
		segs := strings.Split(r.Path, "/")
		for i, s := range segs {
			if strings.HasPrefix(s, ":") {
				segs[i] = "{" + s[1:] + "}"
			}
		}
		if doc.Paths[strings.Join(segs, "/")][strings.ToLower(r.Method)] == nil {
			missing = append(missing, r.Method+" "+r.Path)
		}
	}
	return missing
}

// skipUndescribed are the registered routes /openapi.json leaves out on
// purpose.
func skipUndescribed(method, path string) bool {
	// fiber registers HEAD beside every GET of the platform.
	return method == fiber.MethodHead ||
		// Ledger command routes: one wildcard, described per command
		// (the ledgers' command specs) at the command's own path.
		path == "/v1/entities/:id/*"
}

func TestEveryRouteIsDocumented(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	h.srv.Mount(openapi.Endpoint{Method: "POST", Path: "/v1/admin/things/:id/poke", ID: "pokeThing", Tag: openapi.TagAdmin,
		Access: openapi.AdminKey, Summary: "Poke a thing", Status: 200, OK: "Poked.", Data: openapi.FreeObject("")},
		func(c *fiber.Ctx) error { return gateway.Respond(c, 200, fiber.Map{}) })
	if missing := undocumented(t, h.srv, skipUndescribed); len(missing) > 0 {
		t.Errorf("registered but not in /openapi.json: %v", missing)
	}
	// The registry is what a server made without manifests registers,
	// mounted endpoints last, in order.
	var got, want []string
	for _, e := range h.srv.Endpoints() {
		got = append(got, e.Method+" "+e.Path)
	}
	for _, e := range gateway.PlatformEndpoints(true) {
		want = append(want, e.Method+" "+e.Path)
	}
	want = append(want, "POST /v1/admin/things/:id/poke")
	if !slices.Equal(got, want) {
		t.Errorf("endpoints = %v\nwant %v", got, want)
	}
	for _, path := range []string{"/metrics", "/errors/{slug}", "/ready", "/docs", "/openapi.json", "/health"} {
		if !slices.Contains(want, "GET "+strings.NewReplacer("{", ":", "}", "").Replace(path)) {
			t.Errorf("%s is not a platform endpoint", path)
		}
	}
}
