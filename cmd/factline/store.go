package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/factline/factline/internal/host/app"
)

// storeFlags are shared by every command that opens the store.
type storeFlags struct {
	databaseURL string
	dataDir     string
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.databaseURL, "database-url", "", "Postgres URL; empty uses the embedded SQLite file in --data-dir")
	fs.StringVar(&f.dataDir, "data-dir", "./data", "directory of the embedded store and other local state")
}

// check refuses a --database-url that is no Postgres URL or key=value
// connection string as a usage error (exit 2), before anything is opened.
// The value is not repeated: it may hold a password.
func (f *storeFlags) check(cmd string) error {
	if f.databaseURL == "" {
		return nil
	}
	if err := app.CheckDatabaseURL(f.databaseURL); err != nil {
		return usageErr("factline %s: --database-url: want a Postgres URL (postgres://user:password@host:5432/db) or a key=value connection string (host=... dbname=...)", cmd)
	}
	return nil
}

// requireStore refuses an embedded data dir that holds no store yet, for
// the commands that only read or change an existing one (cmd): opening it
// would create an empty store no server uses, as a mistyped --data-dir
// did. serve and migrate up create the store. A Postgres URL is not
// checked here: opening it says whether the database answers.
func (f *storeFlags) requireStore(cmd string) error {
	if f.databaseURL != "" {
		return f.check(cmd)
	}
	dir := f.dataDir
	if dir == "" {
		dir = "./data" // app.Config's default
	}
	_, err := os.Stat(filepath.Join(dir, app.EmbeddedStoreFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &exitError{code: 1, msg: fmt.Sprintf("factline %s: no store in %s (no %s there): check --data-dir, or create the store with 'factline migrate up --data-dir %s' (or start 'factline serve --data-dir %s' there once)",
			cmd, dir, app.EmbeddedStoreFile, dir, dir)}
	case err != nil:
		return &exitError{code: 1, msg: fmt.Sprintf("factline %s: %v", cmd, err)}
	}
	return nil
}
