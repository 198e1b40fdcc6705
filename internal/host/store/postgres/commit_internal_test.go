package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// notSent is an error pgconn would say came before the request was sent.
type notSent struct{}

func (notSent) Error() string     { return "not sent" }
func (notSent) SafeToRetry() bool { return true }

// TestCommitUnconfirmed: a COMMIT that failed is in doubt unless the
// server answered it (a PgError: rolled back) or it was never sent.
func TestCommitUnconfirmed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"server error", fmt.Errorf("commit: %w", &pgconn.PgError{Code: "40001"}), false},
		{"not sent", fmt.Errorf("commit: %w", notSent{}), false},
		{"connection lost on the way back", fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), true},
		{"deadline while committing", fmt.Errorf("commit: %w", context.DeadlineExceeded), true},
		{"other", errors.New("boom"), true},
	} {
		if got := commitUnconfirmed(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
