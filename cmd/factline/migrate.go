package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/store"
)

// runMigrate applies (up) or lists (status) the store's schema migrations,
// for operators who run them as a deployment step and serve with
// --migrate=false.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "status") {
		return usageErr("usage: factline migrate up|status [--database-url URL | --data-dir DIR]")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("migrate "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf storeFlags
	sf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("factline migrate %s: unexpected arguments %v", sub, fs.Args())
	}
	cfg := app.Config{DatabaseURL: sf.databaseURL, DataDir: sf.dataDir, Logger: quietLogger(stderr)}
	if sub == "up" {
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
