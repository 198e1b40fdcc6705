package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/store"
)

var migrateCommands = []command{
	{name: "up", summary: "apply the pending migrations (creating the embedded store when there is none)", run: runMigrateUp},
	{name: "status", summary: "list each migration, applied or pending", run: runMigrateStatus},
}

// migrateFlags parses the flags of migrate up or status, for operators
// who run migrations as a deployment step and serve with --migrate=false.
func migrateFlags(sub string, args []string, stdout, stderr io.Writer) (app.Config, *storeFlags, error) {
	fs := newFlags("migrate "+sub, "migrate "+sub+" [--database-url URL | --data-dir DIR]")
	var sf storeFlags
	sf.register(fs)
	if err := parse(fs, args, stdout); err != nil {
		return app.Config{}, nil, err
	}
	if err := noArgs(fs); err != nil {
		return app.Config{}, nil, err
	}
	if err := sf.check(fs.Name()); err != nil {
		return app.Config{}, nil, err
	}
	return app.Config{DatabaseURL: sf.databaseURL, DataDir: sf.dataDir, Logger: quietLogger(stderr)}, &sf, nil
}

func runMigrateUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := migrateFlags("up", args, stdout, stderr)
	if err != nil {
		return err
	}
	// What this process applied: another one migrating the same
	// database at once applies the rest, under the same lock.
	applied, err := app.Migrate(ctx, cfg)
	for _, name := range applied {
		fmt.Fprintf(stdout, "applied %s\n", name)
	}
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "nothing to apply: the schema is up to date")
	}
	return nil
}

func runMigrateStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, sf, err := migrateFlags("status", args, stdout, stderr)
	if err != nil {
		return err
	}
	if err := sf.requireStore("migrate status"); err != nil {
		return err
	}
	st, err := app.MigrationStatus(ctx, cfg)
	if len(st) > 0 {
		printMigrations(stdout, st)
	}
	return err
}

func printMigrations(w io.Writer, st []store.MigrationStatus) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tNAME\tSTATUS\tAPPLIED")
	pending := 0
	for _, s := range st {
		status, at := "applied", time.UnixMilli(s.AppliedAt).UTC().Format(time.RFC3339)
		if s.Pending() {
			status, at = "pending", "-"
			pending++
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Version, s.Name, status, at)
	}
	_ = tw.Flush() // as the Fprintf calls around it: output to the terminal
	fmt.Fprintf(w, "%d applied, %d pending\n", len(st)-pending, pending)
}
