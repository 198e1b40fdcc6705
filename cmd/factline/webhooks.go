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
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/webhook"
)

// webhooksUsage is the help of `factline webhooks`.
const webhooksUsage = `Usage: factline webhooks <command> [flags]

Commands:
  replay        replay dead deliveries: factline webhooks replay --tenant T DELIVERY_ID...
                or every dead delivery (of one config): --all [--config-id CFG]
  dead-letters  list dead deliveries: factline webhooks dead-letters --tenant T [--config-id CFG]
  pause         pause a config's deliveries: factline webhooks pause --tenant T CONFIG_ID
  resume        resume a paused config (by pause or a 410): factline webhooks resume --tenant T CONFIG_ID

Flags shared by every command (each also read from FACTLINE_<FLAG>):
  --database-url  Postgres URL; empty: the embedded store in --data-dir
  --data-dir      data directory of the embedded store (default ./data)

A running factline serve delivers replayed deliveries; replay only queues
them (attempt 1, a new signature timestamp) and records
lifecycle.webhook_replayed.`

// runWebhooks runs `factline webhooks ...`: the admin API's replay,
// dead-letter listing, pause and resume, on the store directly.
func runWebhooks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, webhooksUsage)
		if len(args) == 0 {
			return errors.New("a command is required")
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("webhooks "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf storeFlags
	sf.register(fs)
	tenant := fs.String("tenant", "", "tenant (required)")
	jsonOut := fs.Bool("json", false, "print JSON")
	var all *bool
	var configID *string
	limit := 50
	switch sub {
	case "replay":
		all = fs.Bool("all", false, "replay every dead delivery of the tenant (of --config-id when given)")
		configID = fs.String("config-id", "", "with --all: only this config's dead deliveries")
	case "dead-letters":
		configID = fs.String("config-id", "", "only this config's dead deliveries")
		fs.IntVar(&limit, "limit", 50, "page size (at most 200)")
	case "pause", "resume":
	default:
		fmt.Fprintln(stderr, webhooksUsage)
		return fmt.Errorf("unknown command %q (replay, dead-letters, pause, resume)", sub)
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenant == "" {
		return errors.New("--tenant is required")
	}
	st, err := app.OpenStore(ctx, app.Config{DatabaseURL: sf.databaseURL, DataDir: sf.dataDir, DatabaseMaxConns: 2, Logger: quietLogger(stderr)})
	if err != nil {
		return err
	}
	defer st.Close()

	switch sub {
	case "replay":
		return replayDead(ctx, st, *tenant, *configID, *all, *jsonOut, fs.Args(), stdout, stderr)
	case "dead-letters":
		page, err := webhook.DeadLettersStored(ctx, st, *tenant, *configID, "", limit)
		if err != nil {
			return errors.New(problemMessage(err))
		}
		if *jsonOut {
			return json.NewEncoder(stdout).Encode(page)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DELIVERY\tCONFIG\tATTEMPTS\tERROR\tDEAD AT")
		for _, it := range page.Items {
			fmt.Fprintf(tw, "%s\t%s v%d\t%d\t%s\t%s\n", it.DeliveryID, it.WebhookConfigID, it.WebhookConfigVersion, it.Attempts,
				it.Error.Code, time.UnixMilli(it.SentToDLQAt).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		}
		if page.HasMore {
			fmt.Fprintln(tw, "(more: raise --limit)")
		}
		return tw.Flush()
	default: // pause, resume
		if fs.NArg() != 1 {
			return fmt.Errorf("%s: give one config id", sub)
		}
		return pauseOrResume(ctx, st, sub, *tenant, fs.Arg(0), stdout)
	}
}

// replayDead replays the dead deliveries ids, or every dead delivery of
// the tenant (of configID) with all.
func replayDead(ctx context.Context, st store.Store, tenant, configID string, all, jsonOut bool, ids []string, stdout, stderr io.Writer) error {
	if all == (len(ids) > 0) {
		return errors.New("replay: give delivery ids or --all, not both and not neither")
	}
	if all {
		var err error
		if ids, err = allDead(ctx, st, tenant, configID); err != nil {
			return err
		}
	}
	var failed int
	for _, id := range ids {
		v, err := webhook.ReplayStored(ctx, st, time.Now(), tenant, id)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "%s: %s\n", id, problemMessage(err))
			continue
		}
		if jsonOut {
			_ = json.NewEncoder(stdout).Encode(v)
			continue
		}
		note := ""
		if v.Paused {
			note = " (config paused: resume it to deliver)"
		}
		fmt.Fprintf(stdout, "replayed %s (dead letter %s): attempt 1, timestamp %d, fact %s%s\n", v.DeliveryID, v.DLQMessageID,
			v.Timestamp, v.ReplayFactID, note)
	}
	if len(ids) == 0 {
		fmt.Fprintln(stderr, "no dead deliveries")
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d replays failed", failed, len(ids))
	}
	return nil
}

// pauseOrResume pauses (sub "pause") or resumes a webhook config.
func pauseOrResume(ctx context.Context, st store.Store, sub, tenant, id string, stdout io.Writer) error {
	c, err := st.GetConfig(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.Type != webhook.ConfigType) {
		return fmt.Errorf("webhook config %s not found", id)
	}
	if err != nil {
		return err
	}
	if sub == "pause" {
		err := st.PauseWebhookConfig(ctx, &store.WebhookPause{TenantID: tenant, ConfigID: id,
			Reason: webhook.PauseReasonManual, PausedAt: time.Now().UnixMilli()})
		if errors.Is(err, store.ErrAlreadyExists) {
			return fmt.Errorf("webhook config %s is paused already", id)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "paused %s\n", id)
		return nil
	}
	if err := st.ResumeWebhookConfig(ctx, tenant, id); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("webhook config %s is not paused", id)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "resumed %s\n", id)
	return nil
}

// allDead lists the ids of every dead delivery of the tenant.
func allDead(ctx context.Context, st store.Store, tenant, configID string) ([]string, error) {
	var ids []string
	after := ""
	for {
		rows, err := st.ListOutbox(ctx, store.OutboxFilter{TenantID: tenant, Status: store.OutboxDead, ConfigID: configID, AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			ids = append(ids, r.DeliveryID)
		}
		if len(rows) < 500 {
			return ids, nil
		}
		after = rows[len(rows)-1].DeliveryID
	}
}

// problemMessage is a problem's detail with its field errors, or the
// error text.
func problemMessage(err error) string {
	var pe *problem.Error
	if errors.As(err, &pe) {
		msg := pe.Detail
		for _, fe := range pe.Errors {
			msg += "; " + fe.Field + ": " + fe.Message
		}
		return msg
	}
	return err.Error()
}
