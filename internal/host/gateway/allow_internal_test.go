package gateway

import (
	"fmt"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// allowServer is a Server with only what allowedMethods reads: a fiber app
// with routes and an empty manifest table.
func allowServer(t *testing.T, routes int) *Server {
	t.Helper()
	s := &Server{app: fiber.New()}
	s.table.Store(&routeTable{})
	ok := func(c *fiber.Ctx) error { return nil }
	s.app.Use(ok)
	s.app.Get("/v1/entities/:id", ok)
	s.app.Post("/v1/entities/:id/facts", ok)
	for i := range routes {
		s.app.Get(fmt.Sprintf("/v1/other%d/:id", i), ok)
	}
	return s
}

// TestAllowedMethodsListsRoutesAddedLater: the routes allowedMethods keeps
// are read again once a route is added.
func TestAllowedMethodsListsRoutesAddedLater(t *testing.T) {
	s := allowServer(t, 3)
	ok := func(c *fiber.Ctx) error { return nil }
	for _, step := range []struct {
		add  func()
		want string
	}{
		{func() {}, ""},
		{func() { s.app.Get("/v1/late/:id", ok) }, "GET, HEAD"},
		{func() { s.app.Put("/v1/late/:id", ok) }, "GET, HEAD, PUT"},
	} {
		step.add()
		if got := s.allowedMethods("/v1/late/7"); got != step.want {
			t.Fatalf("Allow %q, want %q", got, step.want)
		}
	}
	if got := s.allowedMethods("/v1/entities/e1/facts"); got != "POST" {
		t.Errorf("Allow %q on facts, want POST", got)
	}
}

// TestAllowedMethodsDoesNotCopyTheRouteTable: every command request
// checks the platform's paths, so the check allocates a few values, not
// a copy of fiber's routes and their split patterns.
func TestAllowedMethodsDoesNotCopyTheRouteTable(t *testing.T) {
	s := allowServer(t, 200)
	s.allowedMethods("/v1/entities/e1/deposit")
	allocs := testing.AllocsPerRun(50, func() {
		if got := s.allowedMethods("/v1/entities/e1/deposit"); got != "" {
			t.Fatalf("Allow %q, want none", got)
		}
	})
	if allocs > 4 {
		t.Errorf("%.0f allocations per check, want at most 4", allocs)
	}
}
