package app_test

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/console"
)

// TestEveryRouteIsDocumented: every route the full server registers is in
// its /openapi.json, admin routes included, and `factline openapi`
// describes the same endpoints without a server.
func TestEveryRouteIsDocumented(t *testing.T) {
	t.Parallel()
	a, _ := newApp(t, app.Config{})
	resp, err := a.Server.App().Test(httptest.NewRequest("GET", "/openapi.json", nil), 10_000)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/openapi.json: %v %v", resp, err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, r := range a.Server.App().GetRoutes(true) {
		switch {
		// fiber registers HEAD beside every GET of the platform.
		case r.Method == fiber.MethodHead,
			// Ledger command routes: one wildcard, described per command.
			r.Path == "/v1/entities/:id/*",
			// The console's HTML pages, forms and assets are no API.
			r.Path == console.Prefix || strings.HasPrefix(r.Path, console.Prefix+"/"):
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
	if len(missing) > 0 {
		t.Errorf("registered but not in /openapi.json: %v", missing)
	}
	var got, want []string
	for _, e := range a.Server.Endpoints() {
		got = append(got, e.Method+" "+e.Path+" "+e.ID)
	}
	for _, e := range app.Endpoints(true) {
		want = append(want, e.Method+" "+e.Path+" "+e.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("server endpoints = %v\napp.Endpoints = %v", got, want)
	}
	for _, w := range []string{"POST /v1/admin/webhooks/secrets", "PUT /v1/admin/plugins/:name", "GET /v1/webhooks/deliveries/stats", "GET /v1/admin/stream/history"} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w+" ") }) {
			t.Errorf("%s is not registered", w)
		}
	}
}
