package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// TestDeadlinesShutdownsAndCommitsInDoubt: errors no layer named still get
// their own problem, never a 500: a deadline is a 504; a request stopped
// by a shutdown a 503 that closes the connection; a write whose commit
// went unanswered a 503 (or 504) that says it may be stored, where a
// plain outage's 503 says to retry.
func TestDeadlinesShutdownsAndCommitsInDoubt(t *testing.T) {
	s := &Server{app: fiber.New()}
	unknown := func(cause error) error {
		return fmt.Errorf("append facts: commit: %w: %w", store.ErrOutcomeUnknown, cause)
	}
	for _, tc := range []struct {
		name      string
		err       error
		stopped   bool // the request's own context was cancelled
		status    int
		detail    string
		closeConn bool
	}{
		{"deadline", fmt.Errorf("idempotency: begin: %w", context.DeadlineExceeded), false, http.StatusGatewayTimeout, "took too long", false},
		{"stopped by a shutdown", fmt.Errorf("update entity: %w", context.Canceled), true, http.StatusServiceUnavailable, "shutting down", true},
		{"cancelled elsewhere (a closed pool)", fmt.Errorf("get fact: %w", context.Canceled), false, http.StatusInternalServerError, "internal error", false},
		{"outage", fmt.Errorf("x: %w", store.ErrUnavailable), false, http.StatusServiceUnavailable, "retry in a few seconds", false},
		{"read-only database", fmt.Errorf("x: %w: %w", store.ErrUnavailable, store.ErrReadOnly), false, http.StatusServiceUnavailable, "takes no writes now", false},
		{"commit in doubt, database down", unknown(store.ErrUnavailable), false, http.StatusServiceUnavailable, "may or may not be stored", false},
		{"commit in doubt, deadline", unknown(context.DeadlineExceeded), false, http.StatusGatewayTimeout, "may or may not be stored", false},
		{"commit in doubt, named a timeout on the way", problem.Wrap(problem.Timeout, "The request took too long and was abandoned", unknown(context.DeadlineExceeded)), false, http.StatusGatewayTimeout, "may or may not be stored", false},
		{"other", errors.New("boom"), false, http.StatusInternalServerError, "internal error", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.app.AcquireCtx(&fasthttp.RequestCtx{})
			defer s.app.ReleaseCtx(c)
			if tc.stopped {
				stopped, cancel := context.WithCancel(context.Background())
				cancel()
				c.SetUserContext(stopped)
			}
			pe := s.toProblem(c, tc.err)
			if pe.Kind.Status != tc.status || !strings.Contains(pe.Detail, tc.detail) {
				t.Fatalf("%d %q, want %d containing %q", pe.Kind.Status, pe.Detail, tc.status, tc.detail)
			}
			if got := c.GetRespHeader(fiber.HeaderConnection) == "close"; got != tc.closeConn {
				t.Fatalf("Connection: close %v, want %v", got, tc.closeConn)
			}
		})
	}
}
