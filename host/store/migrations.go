package store

import (
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
