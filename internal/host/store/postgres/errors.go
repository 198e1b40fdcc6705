package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/factline/factline/internal/host/store"
)

// PostgreSQL error codes (SQLSTATE) the store branches on.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	// Class 08 is connection exceptions; 57P01..57P03 are a server shutting
	// down (admin, crash) or not accepting connections yet.
	classConnectionException = "08"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	// A server that cannot do the work now: class 53 is insufficient
	// resources (a full disk, out of memory, too many connections), class
	// 58 its own I/O failing. A write in a read-only transaction (a standby
	// after a failover, default_transaction_read_only) and a full disk are
	// a database that takes no writes now.
	classInsufficientResources = "53"
	classSystemError           = "58"
	codeReadOnlyTransaction    = "25006"
	codeDiskFull               = "53100"
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
	if unavailable(err) {
		return markUnavailable(err)
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

// markUnavailable is the part of interpretError that the pool wrapper
// applies to every error (see db): it only adds [store.ErrUnavailable],
// leaving pgx.ErrNoRows for the callers that branch on it.
func markUnavailable(err error) error {
	if err != nil && unavailable(err) {
		if readOnly(err) {
			return fmt.Errorf("%w: %w: %w", store.ErrUnavailable, store.ErrReadOnly, err)
		}
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// readOnly reports whether err is the server refusing a write it cannot
// take now, rather than one it cannot be reached for.
func readOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == codeReadOnlyTransaction || pgErr.Code == codeDiskFull)
}

// unavailable reports whether err says the database cannot be reached now,
// as opposed to refusing this statement: a failed connect (refused, reset,
// timed out), a connection lost mid-use, a server shutting down or short
// of resources, or one that takes no writes now (readOnly). A
// deadline that ran out on a working connection is not one; it stays a
// timeout.
func unavailable(err error) bool {
	if errors.Is(err, store.ErrUnavailable) {
		return false // classified already
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, classConnectionException) ||
			pgErr.Code == codeAdminShutdown || pgErr.Code == codeCrashShutdown || pgErr.Code == codeCannotConnectNow ||
			strings.HasPrefix(pgErr.Code, classInsufficientResources) || strings.HasPrefix(pgErr.Code, classSystemError) ||
			readOnly(err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &netErr)
}
