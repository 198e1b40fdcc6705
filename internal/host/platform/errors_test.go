package platform

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/factline/factline/internal/host/problem"
)

// TestRefusalTellsRulesFromFailures: the platform's answers to a bad input
// are refusals, wrapped or not; a timeout, an internal fault or a store
// error is not.
func TestRefusalTellsRulesFromFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"validation", problem.Validation([]problem.FieldError{{Field: "type", Code: problem.CodeRequired, Message: "type is required"}}), true},
		{"unknown entity type", problem.Newf(problem.BadRequest, "Unknown entity type: %s", "x"), true},
		{"missing entity", fmt.Errorf("apply: %w", problem.Newf(problem.NotFound, "Entity %s not found", "e1")), true},
		{"stale version", problem.Newf(problem.Conflict, "Entity %s has changed", "e1"), true},
		{"ledger rule", problem.New(problem.Unprocessable, "insufficient funds"), true},
		{"timeout", problem.Wrap(problem.Timeout, "The request took too long and was abandoned", context.DeadlineExceeded), false},
		{"internal", problem.New(problem.Internal, "boom"), false},
		{"store down", errors.New("store: connection refused"), false},
		{"nil", nil, false},
	} {
		pe, refused := Refusal(tc.err)
		if refused != tc.refused || (refused && pe == nil) {
			t.Errorf("%s: Refusal = %v, %v; want refused %v", tc.name, pe, refused, tc.refused)
		}
	}
}
