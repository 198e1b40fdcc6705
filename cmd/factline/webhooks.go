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
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/webhook"
)

var webhooksCommands = []command{
	{name: "replay", summary: "replay dead deliveries: replay --tenant T DELIVERY_ID..., or --all [--config-id CFG]", run: runWebhooksReplay},
	{name: "dead-letters", summary: "list dead deliveries: dead-letters --tenant T [--config-id CFG]", run: runWebhooksDeadLetters},
	{name: "pause", summary: "pause a config's deliveries: pause --tenant T CONFIG_ID", run: runWebhooksPauseOrResume("pause")},
	{name: "resume", summary: "resume a paused config (by pause or a 410): resume --tenant T CONFIG_ID", run: runWebhooksPauseOrResume("resume")},
}

// webhooksNotes end the help of `factline webhooks`.
const webhooksNotes = `Each works on the store directly, as the admin API does, and takes
--tenant (required), --json and --database-url or --data-dir (default
./data, a store that must exist), each also read from FACTLINE_<FLAG>.

A running factline serve delivers replayed deliveries; replay only queues
them (attempt 1, a new signature timestamp) and records
lifecycle.webhook_replayed.`

// webhookFlags are the flags every webhooks command takes.
type webhookFlags struct {
	fs      *flag.FlagSet
	store   storeFlags
	tenant  *string
	jsonOut *bool
}

func newWebhookFlags(sub, synopsis string) *webhookFlags {
	w := &webhookFlags{fs: newFlags("webhooks "+sub, "webhooks "+synopsis)}
	w.store.register(w.fs)
	w.tenant = w.fs.String("tenant", "", "tenant (required)")
	w.jsonOut = w.fs.Bool("json", false, "print JSON")
	return w
}

// parse parses args and checks --tenant.
func (w *webhookFlags) parse(args []string, stdout io.Writer) error {
	if err := parse(w.fs, args, stdout); err != nil {
		return err
	}
	if *w.tenant == "" {
		return usageErr("factline %s: --tenant is required", w.fs.Name())
	}
	return nil
}

// open opens the existing store.
func (w *webhookFlags) open(ctx context.Context, stderr io.Writer) (store.Store, error) {
	if err := w.store.requireStore(w.fs.Name()); err != nil {
		return nil, err
	}
	return app.OpenStore(ctx, app.Config{DatabaseURL: w.store.databaseURL, DataDir: w.store.dataDir, DatabaseMaxConns: 2, Logger: quietLogger(stderr)})
}

func runWebhooksReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	w := newWebhookFlags("replay", "replay --tenant T DELIVERY_ID... | --all [--config-id CFG] [flags]")
	all := w.fs.Bool("all", false, "replay every dead delivery of the tenant (of --config-id when given)")
	configID := w.fs.String("config-id", "", "with --all: only this config's dead deliveries")
	if err := w.parse(args, stdout); err != nil {
		return err
	}
	if *all == (w.fs.NArg() > 0) {
		return usageErr("factline webhooks replay: give delivery ids or --all, not both and not neither")
	}
	if *configID != "" && !*all {
		return usageErr("factline webhooks replay: --config-id goes with --all")
	}
	st, err := w.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	return replayDead(ctx, st, *w.tenant, *configID, *all, *w.jsonOut, w.fs.Args(), stdout, stderr)
}

func runWebhooksDeadLetters(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	w := newWebhookFlags("dead-letters", "dead-letters --tenant T [--config-id CFG] [--limit N] [flags]")
	configID := w.fs.String("config-id", "", "only this config's dead deliveries")
	limit := w.fs.Int("limit", 50, fmt.Sprintf("page size, 1 to %d", platform.MaxPageSize))
	if err := w.parse(args, stdout); err != nil {
		return err
	}
	if err := noArgs(w.fs); err != nil {
		return err
	}
	if *limit < 1 || *limit > platform.MaxPageSize {
		return usageErr("factline webhooks dead-letters: --limit must be 1 to %d, got %d", platform.MaxPageSize, *limit)
	}
	st, err := w.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	page, err := webhook.DeadLettersStored(ctx, st, *w.tenant, *configID, "", *limit)
	if err != nil {
		return errors.New(problemMessage(err))
	}
	if *w.jsonOut {
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
}

// runWebhooksPauseOrResume returns the command pausing (sub "pause") or
// resuming a webhook config.
func runWebhooksPauseOrResume(sub string) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		w := newWebhookFlags(sub, sub+" --tenant T CONFIG_ID [flags]")
		if err := w.parse(args, stdout); err != nil {
			return err
		}
		if w.fs.NArg() != 1 {
			return usageErr("factline webhooks %s: give one config id, got %d arguments %v", sub, w.fs.NArg(), w.fs.Args())
		}
		st, err := w.open(ctx, stderr)
		if err != nil {
			return err
		}
		defer st.Close()
		return pauseOrResume(ctx, st, sub, *w.tenant, w.fs.Arg(0), stdout)
	}
}

// replayDead replays the dead deliveries ids, or every dead delivery of
// the tenant (of configID) with all.
func replayDead(ctx context.Context, st store.Store, tenant, configID string, all, jsonOut bool, ids []string, stdout, stderr io.Writer) error {
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
