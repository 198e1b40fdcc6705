package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/store"
)

var keysCommands = []command{
	{name: "create", summary: "create an API key and print it (shown once)", run: runKeysCreate},
	{name: "list", summary: "list the API keys", run: runKeysList},
	{name: "revoke", summary: "revoke an API key", run: runKeysRevoke},
}

// openKeyStore opens the existing store of a keys command.
func openKeyStore(ctx context.Context, fs *flag.FlagSet, sf storeFlags, stderr io.Writer) (store.Store, error) {
	if err := sf.requireStore(fs.Name()); err != nil {
		return nil, err
	}
	return app.OpenStore(ctx, app.Config{DatabaseURL: sf.databaseURL, DataDir: sf.dataDir, Logger: quietLogger(stderr)})
}

func runKeysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys create", "keys create --tenant T [--mode live|test|admin] [--name N] [flags]")
	var sf storeFlags
	sf.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	tenant := fs.String("tenant", "", "tenant the key belongs to (required)")
	mode := fs.String("mode", auth.ModeLive, "key mode: live, test or admin")
	name := fs.String("name", "", "a label for the key")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	switch {
	case *tenant == "":
		return usageErr("factline keys create: --tenant is required")
	case !auth.ValidTenant(*tenant):
		return usageErr("factline keys create: --tenant %q: use 1-64 letters, digits, _ . and -", *tenant)
	case !auth.ValidMode(*mode):
		return usageErr("factline keys create: --mode %q: use live, test or admin", *mode)
	}
	st, err := openKeyStore(ctx, fs, sf, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	key, rec, err := auth.CreateKey(ctx, st, *tenant, *mode, *name, time.Now())
	if err != nil {
		return err
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(map[string]any{"key": key, "id": rec.ID, "tenant_id": rec.TenantID, "mode": rec.Mode})
	}
	fmt.Fprintln(stdout, key)
	fmt.Fprintf(stderr, "created %s key %s for tenant %s; the key above is shown only once\n", rec.Mode, rec.ID, rec.TenantID)
	return nil
}

func runKeysList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys list", "keys list [--tenant T] [flags]")
	var sf storeFlags
	sf.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	tenant := fs.String("tenant", "", "only keys of this tenant")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	st, err := openKeyStore(ctx, fs, sf, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.ListAPIKeys(ctx, *tenant)
	if err != nil {
		return err
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(keys)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tMODE\tPREFIX\tNAME\tCREATED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = time.UnixMilli(*k.RevokedAt).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s…\t%s\t%s\t%s\n", k.ID, k.TenantID, k.Mode, k.Prefix, k.Name, time.UnixMilli(k.CreatedAt).UTC().Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func runKeysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys revoke", "keys revoke --id KEY_ID [flags]  (or: keys revoke [flags] KEY_ID)")
	var sf storeFlags
	sf.register(fs)
	keyID := fs.String("id", "", "id of the key to revoke (key_...; see keys list)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *keyID == "" && fs.NArg() == 1 {
		*keyID = fs.Arg(0)
	} else if err := noArgs(fs); err != nil {
		return err
	}
	if *keyID == "" {
		return usageErr("factline keys revoke: --id is required")
	}
	st, err := openKeyStore(ctx, fs, sf, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.RevokeAPIKey(ctx, *keyID, time.Now().UnixMilli()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no API key with id %s", *keyID)
		}
		return err
	}
	fmt.Fprintf(stdout, "revoked %s\n", *keyID)
	return nil
}
