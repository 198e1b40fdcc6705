package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/factline/factline/internal/host/store"
)

// interpretError maps driver errors to the store's sentinel errors. It is the
// only place that looks at SQLite result codes. The driver error stays in
// the chain so its message is not lost.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		// The primary code: BUSY and LOCKED come with extended variants.
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			// Another process (a CLI command, a backup) held the file's
			// lock past the busy timeout: retrying later may succeed.
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return fmt.Errorf("%w: %w", store.ErrAlreadyExists, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
	}
	return err
}
