package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one versioned schema change of a store implementation,
// read from a file named NNNN_description.sql.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// LoadMigrations reads every *.sql file at the root of fsys, ordered by
// version. Versions must be positive and unique. Both implementations
// keep their own SQL; the naming and ordering rules are shared.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int64]string{}
	for _, name := range names {
		prefix, _, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", other, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: path.Base(name), SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return int(a.Version - b.Version) })
	return ms, nil
}

// MigrationsDir returns the directory dir of an embedded file system (the
// migrations/ folder of an implementation); it panics on a bad name, a
// programming error.
func MigrationsDir(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// MigrationStatus is one migration of the binary and whether a database
// has it.
type MigrationStatus struct {
	Migration
	// AppliedAt is when it was applied, in ms since the epoch; 0: pending.
	AppliedAt int64
}

// Pending reports whether the migration is yet to be applied.
func (s MigrationStatus) Pending() bool { return s.AppliedAt == 0 }

// ErrMigrationsPending is matched (errors.Is) by a [PendingError].
var ErrMigrationsPending = errors.New("migrations pending")

// PendingError is returned by a store opened with migrations off when the
// database lacks migrations the binary has.
type PendingError struct{ Pending []Migration }

func (e *PendingError) Error() string {
	names := make([]string, len(e.Pending))
	for i, m := range e.Pending {
		names[i] = m.Name
	}
	return fmt.Sprintf("%d migration(s) pending (%s): run factline migrate up", len(e.Pending), strings.Join(names, ", "))
}

func (e *PendingError) Is(target error) bool { return target == ErrMigrationsPending }

// MigrationPlan pairs the binary's migrations with the versions a database
// recorded (version -> applied_at). A recorded version the binary does not
// know means the schema is newer than the binary: an error.
func MigrationPlan(ms []Migration, applied map[int64]int64) ([]MigrationStatus, error) {
	known := map[int64]bool{}
	out := make([]MigrationStatus, len(ms))
	for i, m := range ms {
		known[m.Version] = true
		out[i] = MigrationStatus{Migration: m, AppliedAt: applied[m.Version]}
	}
	for v := range applied {
		if !known[v] {
			return out, fmt.Errorf("database has migration version %d, which this binary does not know: it is newer than this binary", v)
		}
	}
	return out, nil
}

// CheckApplied returns a *PendingError when st lists a pending migration.
func CheckApplied(st []MigrationStatus) error {
	var pending []Migration
	for _, s := range st {
		if s.Pending() {
			pending = append(pending, s.Migration)
		}
	}
	if len(pending) > 0 {
		return &PendingError{Pending: pending}
	}
	return nil
}
