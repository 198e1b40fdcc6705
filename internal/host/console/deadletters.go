package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// replayAllPage is the confirmation step of a bulk replay: it counts what
// the replay would put back (the dead deliveries, from
// GET /v1/admin/webhooks/deliveries?status=dead) and
// offers the one form that does it.
func (c *Console) replayAllPage(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	configID := strings.TrimSpace(fc.Query("config_id"))
	q := url.Values{"status": {"dead"}, "limit": {"200"}}
	if configID != "" {
		q.Set("config_id", configID)
	}
	var out struct {
		Items   []map[string]any `json:"items"`
		HasMore bool             `json:"hasMore"`
	}
	err := c.call(ctx, s, http.MethodGet, "/v1/admin/webhooks/deliveries?"+q.Encode(), "", nil, &out)
	count := fmt.Sprint(len(out.Items))
	if out.HasMore {
		count = "more than " + count
	}
	if err != nil {
		// Not "nothing to replay" beside the refusal.
		return c.show(fc, s, "replay-all", nil, err)
	}
	return c.show(fc, s, "replay-all", map[string]any{"config_id": configID, "count": count, "items": out.Items, "empty": len(out.Items) == 0}, nil)
}

// replayAll replays every dead letter (of one config) through
// POST /v1/admin/webhooks/dead-letters/replay, once confirmed.
func (c *Console) replayAll(fc *fiber.Ctx, s *session) error {
	ctx, cancel := reqCtx(fc)
	defer cancel()
	if !confirmed(fc) {
		return c.unconfirmed(fc, s, "Confirm the bulk replay first")
	}
	in := map[string]string{}
	if id := strings.TrimSpace(fc.FormValue("config_id")); id != "" {
		in["config_id"] = id
	}
	body, _ := json.Marshal(in)
	var out struct {
		Replayed []map[string]any `json:"replayed"`
		Failed   []map[string]any `json:"failed"`
		HasMore  bool             `json:"hasMore"`
	}
	err := c.call(ctx, s, http.MethodPost, "/v1/admin/webhooks/dead-letters/replay", "application/json", body, &out)
	var pe *apiError
	if errors.As(err, &pe) || err != nil {
		return c.done(fc, s, "/dead-letters", "", err)
	}
	notice := fmt.Sprintf("%d dead letters replayed", len(out.Replayed))
	if len(out.Failed) > 0 {
		notice += fmt.Sprintf(", %d could not be", len(out.Failed))
	}
	if out.HasMore {
		notice += "; more remain, replay again"
	}
	return c.done(fc, s, "/dead-letters", notice, nil)
}
