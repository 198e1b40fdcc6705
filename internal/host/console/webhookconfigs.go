package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
)

// Webhook config management for tenant admins: create, edit as a new
// version, archive, pause. Every write is the public API's
// (POST /v1/configs, PUT and DELETE /v1/configs/:id,
// POST /v1/admin/webhooks/secrets and .../configs/:id/pause).

// webhookForm is the create and edit form: what the user typed, and the
// API's problems by form field.
type webhookForm struct {
	ID          string // empty: a new webhook
	Version     string // the version the edit started from
	Name        string
	URL         string
	Triggers    string
	SecretRef   string
	NewSecret   bool
	MaxAttempts string
	Timeout     string
	// Refs are the secret references of the tenant's webhook configs.
	Refs []string
	// Errors holds the API's field problems by form field; General the
	// problem and the field problems no form field shows.
	Errors  map[string][]string
	General []string
	// Created is a secret made for this form whose config was refused:
	// shown once here, and kept as the form's secret reference.
	Created map[string]any
	// TraceID is the refused request's id, to find its log line.
	TraceID string
	// Current is the config as it is now, when an edit was refused
	// because the config changed since the form was opened (Version is
	// then Current's); Differs names the fields whose value there is
	// not what the form holds.
	Current *webhookForm
	Differs map[string]bool
}

// pausedConfigs reads the tenant's paused configs
// (GET /v1/admin/webhooks/paused) as a set of config ids.
func (c *Console) pausedConfigs(ctx context.Context, s *session) (map[string]bool, error) {
	var out struct {
		Items []struct {
			ConfigID string `json:"config_id"`
		} `json:"items"`
	}
	if err := c.call(ctx, s, http.MethodGet, "/v1/admin/webhooks/paused", "", nil, &out); err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(out.Items))
	for _, it := range out.Items {
		m[it.ConfigID] = true
	}
	return m, nil
}

// secretRefs lists the secret references the tenant's webhook configs use
// (the API has no listing of secrets), for the form's suggestions.
func (c *Console) secretRefs(ctx context.Context, s *session) []string {
	var out struct {
		Items []struct {
			Settings struct {
				SecretRef string `json:"secret_ref"`
			} `json:"settings"`
		} `json:"items"`
	}
	if err := c.call(ctx, s, http.MethodGet, "/v1/configs?type=webhook&status=active&limit=200", "", nil, &out); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var refs []string
	for _, it := range out.Items {
		if r := it.Settings.SecretRef; r != "" && !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	sort.Strings(refs)
	return refs
}

func (c *Console) newWebhookPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	f := &webhookForm{NewSecret: true, Refs: c.secretRefs(ctx, s)}
	return c.render(fc, s, fiber.StatusOK, "webhook-form", f, nil)
}

// webhookConfig reads the current version of a config.
// A config of another type (a projection's) is not found here: its
// edit form and archive question would have spoken of a webhook.
func (c *Console) webhookConfig(ctx context.Context, s *session, id string) (map[string]any, error) {
	var cfg map[string]any
	if err := c.call(ctx, s, http.MethodGet, "/v1/configs/"+url.PathEscape(id), "", nil, &cfg); err != nil {
		return nil, err
	}
	if str(cfg["type"]) != "webhook" {
		return nil, &apiError{Status: fiber.StatusNotFound, Title: "Not Found", Detail: "Webhook " + id + " not found: config " + id + " is a " + str(cfg["type"]) + " config"}
	}
	return cfg, nil
}

// conflict shows a 409 for a view an archived config does not offer.
func (c *Console) conflict(fc *fiber.Ctx, s *session, detail string) error {
	return c.render(fc, s, fiber.StatusConflict, "message", nil, &apiError{Status: 409, Title: "Conflict", Detail: detail})
}

// secretRefField is the API's field name of a config's secret reference.
const secretRefField = "settings.secret_ref"

func (c *Console) editWebhookPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	cfg, err := c.webhookConfig(ctx, s, gateway.Param(fc, "id"))
	if err != nil {
		return c.show(fc, s, "webhook-form", nil, err)
	}
	if st := str(cfg["status"]); st != "active" {
		// The API refuses to update an archived config: say so before
		// the user edits anything.
		return c.conflict(fc, s, "Webhook "+str(cfg["id"])+" is "+st+"; only an active config can be edited")
	}
	f := configForm(cfg)
	f.Refs = c.secretRefs(ctx, s)
	return c.render(fc, s, fiber.StatusOK, "webhook-form", f, nil)
}

// configForm is the edit form filled from a config.
func configForm(cfg map[string]any) *webhookForm {
	f := &webhookForm{ID: str(cfg["id"]), Version: num(cfg["version"]), Name: str(cfg["name"])}
	st, _ := cfg["settings"].(map[string]any)
	f.URL, f.SecretRef = str(st["url"]), str(st["secret_ref"])
	if ts, ok := st["triggers"].([]any); ok {
		var parts []string
		for _, t := range ts {
			parts = append(parts, str(t))
		}
		f.Triggers = strings.Join(parts, ", ")
	}
	if r, ok := st["retry"].(map[string]any); ok {
		f.MaxAttempts, f.Timeout = num(r["max_attempts"]), num(r["timeout_seconds"])
	}
	return f
}

// readForm takes the posted form as the user typed it.
func readForm(fc *fiber.Ctx) *webhookForm {
	v := func(k string) string { return strings.TrimSpace(fc.FormValue(k)) }
	return &webhookForm{ID: gateway.Param(fc, "id"), Version: v("version"), Name: v("name"), URL: v("url"),
		Triggers: v("triggers"), SecretRef: v("secret_ref"), NewSecret: fc.FormValue("new_secret") == "yes",
		MaxAttempts: v("max_attempts"), Timeout: v("timeout_seconds")}
}

// triggers splits on commas and white space.
func (f *webhookForm) triggers() []any {
	out := []any{}
	for _, t := range strings.FieldsFunc(f.Triggers, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		out = append(out, t)
	}
	return out
}

// apply writes the form's fields into settings; an empty retry field
// takes the default again.
func (f *webhookForm) apply(settings map[string]any) {
	settings["url"], settings["secret_ref"], settings["triggers"] = f.URL, f.SecretRef, f.triggers()
	retry, _ := settings["retry"].(map[string]any)
	if retry == nil {
		retry = map[string]any{}
	}
	for k, v := range map[string]string{"max_attempts": f.MaxAttempts, "timeout_seconds": f.Timeout} {
		switch n, err := strconv.ParseInt(v, 10, 64); {
		case v == "":
			delete(retry, k)
		case err == nil:
			retry[k] = n
		default:
			retry[k] = v // the API names what is wrong with it
		}
	}
	if len(retry) == 0 {
		delete(settings, "retry")
	} else {
		settings["retry"] = retry
	}
}

// saveWebhook creates (no id) or updates a webhook config from the form.
// A new secret, when asked for, is created only once the API has refused
// the config for nothing but its missing secret_ref, so a form refused for
// anything else leaves no secret behind. A refusal shows the form again as
// typed, each problem beside its field.
func (c *Console) saveWebhook(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	f := readForm(fc)
	// The box is ticked by default: a reference typed beside it is the
	// user's choice.
	f.NewSecret = f.NewSecret && f.SecretRef == ""
	cfg, err := c.sendWebhook(ctx, s, f)
	var created map[string]any
	if f.NewSecret && onlySecretRefRefused(err) {
		if err := c.call(ctx, s, http.MethodPost, "/v1/admin/webhooks/secrets", "", nil, &created); err != nil {
			return c.formProblem(fc, s, f, err)
		}
		f.SecretRef, f.NewSecret = str(created["secret_ref"]), false
		cfg, err = c.sendWebhook(ctx, s, f)
	}
	if err != nil {
		f.Created = created
		if f.NewSecret {
			err = withoutSecretRefErrors(err)
		} else if f.SecretRef == "" {
			err = noSecretChosen(err)
		}
		c.rebase(ctx, s, f, err)
		return c.formProblem(fc, s, f, err)
	}
	notice := "Webhook " + str(cfg["id"]) + " saved as version " + num(cfg["version"])
	if created != nil {
		// The new secret is shown once, on the page the redirect leads to.
		return c.reveal(fc, s, "webhook-secret", map[string]any{"notice": notice, "secret": created})
	}
	return c.done(fc, s, "/webhooks", notice, nil)
}

// sendWebhook creates or updates the form's config through the API.
func (c *Console) sendWebhook(ctx context.Context, s *session, f *webhookForm) (map[string]any, error) {
	var cfg map[string]any
	if f.ID == "" {
		settings := map[string]any{}
		f.apply(settings)
		body, _ := json.Marshal(map[string]any{"type": "webhook", "name": f.Name, "settings": settings})
		err := c.call(ctx, s, http.MethodPost, "/v1/configs", "application/json", body, &cfg)
		return cfg, err
	}
	cur, err := c.webhookConfig(ctx, s, f.ID)
	if err != nil {
		return nil, err
	}
	settings, _ := cur["settings"].(map[string]any)
	if settings == nil {
		settings = map[string]any{}
	}
	f.apply(settings)
	in := map[string]any{"name": f.Name, "settings": settings}
	if v, perr := strconv.ParseInt(f.Version, 10, 64); perr == nil {
		in["version"] = v // a concurrent edit is a 409, not lost
	}
	body, _ := json.Marshal(in)
	err = c.call(ctx, s, http.MethodPut, "/v1/configs/"+url.PathEscape(f.ID), "application/json", body, &cfg)
	return cfg, err
}

// rebase readies an edit refused because the config changed since its
// form was opened (a 409 while the config is active at another version)
// to be sent again: the form keeps what the user typed, takes the current
// version, so that saving again is not the same 409, and shows beside
// each field the current value where it differs. Nothing is saved
// meanwhile: the user decides whether their values replace the other
// change.
func (c *Console) rebase(ctx context.Context, s *session, f *webhookForm, err error) {
	var pe *apiError
	if f.ID == "" || !errors.As(err, &pe) || pe.Status != http.StatusConflict {
		return
	}
	cfg, rerr := c.webhookConfig(ctx, s, f.ID)
	if rerr != nil || str(cfg["status"]) != "active" {
		return
	}
	cur := configForm(cfg)
	if cur.Version == "" || cur.Version == f.Version {
		return
	}
	f.Version, f.Current = cur.Version, cur
	f.Differs = map[string]bool{
		"name":            f.Name != cur.Name,
		"url":             f.URL != cur.URL,
		"triggers":        !slices.Equal(f.triggers(), cur.triggers()),
		"secret_ref":      f.SecretRef != cur.SecretRef,
		"max_attempts":    f.MaxAttempts != cur.MaxAttempts,
		"timeout_seconds": f.Timeout != cur.Timeout,
	}
}

// withoutSecretRefErrors drops the missing secret_ref from a refusal of a
// form that asked for a new secret: that secret is made once the rest is
// accepted, and the user has nothing to fix there.
func withoutSecretRefErrors(err error) error {
	var pe *apiError
	if !errors.As(err, &pe) {
		return err
	}
	out := *pe
	out.Errors = nil
	for _, fe := range pe.Errors {
		if fe.Field != secretRefField {
			out.Errors = append(out.Errors, fe)
		}
	}
	return &out
}

// noSecretChosen says, for a form that neither asked for a new secret
// nor referenced one, what to do in the form's words: the API's "secret_ref
// is required" names a request's field and an endpoint the form does not
// show.
func noSecretChosen(err error) error {
	var pe *apiError
	if !errors.As(err, &pe) {
		return err
	}
	out := *pe
	out.Errors = slices.Clone(pe.Errors)
	for i, fe := range out.Errors {
		if fe.Field == secretRefField {
			out.Errors[i].Message = "Choose a secret: tick \"Create a new secret\", or give the reference of an existing one"
		}
	}
	return &out
}

// onlySecretRefRefused reports whether err is a validation problem whose
// only field error is settings.secret_ref: the config is good but for the
// secret the form asked to create. The API validates before it writes, so
// that refusal stored nothing.
func onlySecretRefRefused(err error) bool {
	var pe *apiError
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || len(pe.Errors) == 0 {
		return false
	}
	for _, fe := range pe.Errors {
		if fe.Field != secretRefField {
			return false
		}
	}
	return true
}

// formProblem shows the form again with the API's problem.
func (c *Console) formProblem(fc *fiber.Ctx, s *session, f *webhookForm, err error) error {
	var pe *apiError
	if !errors.As(err, &pe) {
		return c.done(fc, s, "/webhooks", "", err)
	}
	ctx, cancel := reqCtx(fc)
	defer cancel()
	f.Refs = c.secretRefs(ctx, s)
	f.Errors = map[string][]string{}
	// The refused request's id, as every other problem the console shows
	// carries; one the console refused itself is logged under this
	// request's.
	f.TraceID = pe.TraceID
	if f.TraceID == "" {
		f.TraceID = gateway.RequestID(fc)
	}
	summary := pe.Title
	if pe.Detail != "" {
		summary += ": " + pe.Detail
	}
	f.General = append(f.General, summary)
	for _, fe := range pe.Errors {
		if k := formField(fe.Field); k != "" {
			f.Errors[k] = append(f.Errors[k], fe.Message)
			continue
		}
		f.General = append(f.General, fe.Field+": "+fe.Message)
	}
	return c.render(fc, s, pe.Status, "webhook-form", f, nil)
}

// formField is the form field that shows an API problem's field.
func formField(apiField string) string {
	switch {
	case apiField == "name":
		return "name"
	case apiField == "settings.url":
		return "url"
	case apiField == "settings.triggers" || strings.HasPrefix(apiField, "settings.triggers["):
		return "triggers"
	case apiField == secretRefField:
		return "secret_ref"
	case apiField == "settings.retry.max_attempts":
		return "max_attempts"
	case apiField == "settings.retry.timeout_seconds":
		return "timeout_seconds"
	}
	return ""
}

// archiveWebhookPage asks to confirm an archive.
func (c *Console) archiveWebhookPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	cfg, err := c.webhookConfig(ctx, s, gateway.Param(fc, "id"))
	if err == nil && str(cfg["status"]) != "active" {
		return c.conflict(fc, s, "Webhook "+str(cfg["id"])+" is archived already")
	}
	return c.show(fc, s, "webhook-archive", cfg, err)
}

// archiveWebhook archives through DELETE /v1/configs/:id, once confirmed.
func (c *Console) archiveWebhook(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	if !confirmed(fc) {
		return c.unconfirmed(fc, s, "Confirm the archive first")
	}
	id := gateway.Param(fc, "id")
	if _, err := c.webhookConfig(ctx, s, id); err != nil {
		return c.done(fc, s, "/webhooks", "", err)
	}
	err := c.call(ctx, s, http.MethodDelete, "/v1/configs/"+url.PathEscape(id), "", nil, nil)
	return c.done(fc, s, "/webhooks", "Webhook "+id+" archived", err)
}

// pauseWebhook pauses through POST /v1/admin/webhooks/configs/:id/pause.
func (c *Console) pauseWebhook(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	id := gateway.Param(fc, "id")
	err := c.call(ctx, s, http.MethodPost, "/v1/admin/webhooks/configs/"+url.PathEscape(id)+"/pause", "", nil, nil)
	return c.done(fc, s, "/webhooks", "Webhook "+id+" paused", err)
}

func str(v any) string { s, _ := v.(string); return s }
