package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/factline/factline/internal/host/store"
)

// notSent is an error pgconn would say came before the request was sent:
// its context had ended.
type notSent struct{}

func (notSent) Error() string     { return "not sent" }
func (notSent) SafeToRetry() bool { return true }
func (notSent) Unwrap() error     { return context.Canceled }

// lostWhileReading is pgconn's "conn closed" after the request went out:
// safe to retry by its own account, and yet sent.
type lostWhileReading struct{}

func (lostWhileReading) Error() string     { return "conn closed" }
func (lostWhileReading) SafeToRetry() bool { return true }

// TestCommitUnconfirmed: a COMMIT (or a statement committing by itself)
// that failed is in doubt unless the server answered it with an error (a
// PgError of severity ERROR: rolled back), no connection was made, or its
// context ended before it was sent.
func TestCommitUnconfirmed(t *testing.T) {
	_, connectErr := pgconn.Connect(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if connectErr == nil {
		t.Fatal("connected to port 1")
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"server error", fmt.Errorf("commit: %w", &pgconn.PgError{Severity: "ERROR", Code: "40001"}), false},
		{"server error, localized", fmt.Errorf("commit: %w", &pgconn.PgError{Severity: "FEHLER", SeverityUnlocalized: "ERROR", Code: "23505"}), false},
		{"session ended while waiting for a standby", fmt.Errorf("commit: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}), true},
		{"no connection", fmt.Errorf("create entity: %w", connectErr), false},
		{"context ended before sending", fmt.Errorf("commit: %w", notSent{}), false},
		{"conn closed while reading the answer", fmt.Errorf("commit: %w", lostWhileReading{}), true},
		{"connection lost on the way back", fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), true},
		{"deadline while committing", fmt.Errorf("commit: %w", context.DeadlineExceeded), true},
		{"other", errors.New("boom"), true},
	} {
		if got := commitUnconfirmed(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if err := inDoubt(fmt.Errorf("x: %w", io.ErrUnexpectedEOF)); !errors.Is(err, store.ErrOutcomeUnknown) {
		t.Errorf("inDoubt(lost connection) = %v, want ErrOutcomeUnknown", err)
	}
	if err := inDoubt(fmt.Errorf("x: %w", pgx.ErrNoRows)); errors.Is(err, store.ErrOutcomeUnknown) {
		t.Errorf("inDoubt(no rows) = %v: a statement that answered is not in doubt", err)
	}
}
