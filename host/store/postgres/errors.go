package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/factline/factline/host/store"
)

// PostgreSQL error codes (SQLSTATE) the store branches on.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
)

// interpretError maps driver errors to the store's sentinel errors. It is the
// only place that looks at pgx errors and SQLSTATE codes. The driver error
// stays in the chain so its message (constraint, detail) is not lost.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUniqueViolation:
			return fmt.Errorf("%w: %w", store.ErrAlreadyExists, err)
		case codeForeignKeyViolation:
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
	}
	return err
}
