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

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErr("usage: factline keys create|list|revoke [flags]")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf storeFlags
	sf.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	var tenant, mode, name, keyID string
	switch sub {
	case "create":
		fs.StringVar(&tenant, "tenant", "", "tenant the key belongs to (required)")
		fs.StringVar(&mode, "mode", auth.ModeLive, "key mode: live, test or admin")
		fs.StringVar(&name, "name", "", "a label for the key")
	case "list":
		fs.StringVar(&tenant, "tenant", "", "only keys of this tenant")
	case "revoke":
		fs.StringVar(&keyID, "id", "", "id of the key to revoke (key_...; see keys list)")
	default:
		return usageErr("factline keys: unknown subcommand %q (create, list, revoke)", sub)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if sub == "revoke" && keyID == "" && fs.NArg() == 1 {
			keyID = fs.Arg(0)
		} else {
			return usageErr("factline keys %s: unexpected arguments %v", sub, fs.Args())
		}
	}
	switch {
	case sub == "create" && tenant == "":
		return usageErr("factline keys create: --tenant is required")
	case sub == "create" && !auth.ValidTenant(tenant):
		return usageErr("factline keys create: --tenant %q: use 1-64 letters, digits, _ . and -", tenant)
	case sub == "create" && !auth.ValidMode(mode):
		return usageErr("factline keys create: --mode %q: use live, test or admin", mode)
	case sub == "revoke" && keyID == "":
		return usageErr("factline keys revoke: --id is required")
	}
	st, err := app.OpenStore(ctx, app.Config{DatabaseURL: sf.databaseURL, DataDir: sf.dataDir, Logger: quietLogger(stderr)})
	if err != nil {
		return err
	}
	defer st.Close()

	switch sub {
	case "create":
		key, rec, err := auth.CreateKey(ctx, st, tenant, mode, name, time.Now())
		if err != nil {
			return err
		}
		if *jsonOut {
			return json.NewEncoder(stdout).Encode(map[string]any{"key": key, "id": rec.ID, "tenant_id": rec.TenantID, "mode": rec.Mode})
		}
		fmt.Fprintln(stdout, key)
		fmt.Fprintf(stderr, "created %s key %s for tenant %s; the key above is shown only once\n", rec.Mode, rec.ID, rec.TenantID)
		return nil
	case "list":
		keys, err := st.ListAPIKeys(ctx, tenant)
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
	default: // revoke
		if err := st.RevokeAPIKey(ctx, keyID, time.Now().UnixMilli()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no API key with id %s", keyID)
			}
			return err
		}
		fmt.Fprintf(stdout, "revoked %s\n", keyID)
		return nil
	}
}
