package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/host/id"
	"github.com/factline/factline/host/platform"
	"github.com/factline/factline/host/problem"
)

// Meta is the envelope's meta object.
type Meta struct {
	RequestID string `json:"request_id"`
	Timestamp int64  `json:"timestamp"`
}

// Envelope is the success body.
type Envelope struct {
	Data any  `json:"data"`
	Meta Meta `json:"meta"`
}

func newRequestID(c *fiber.Ctx) string {
	rid := id.New(id.Request)
	c.Locals(localRequestID, rid)
	c.Set(HeaderRequestID, rid)
	return rid
}

func jsonMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("gateway: encode response: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// envelope renders a success body.
func envelope(c *fiber.Ctx, data any) ([]byte, error) {
	return jsonMarshal(Envelope{Data: data, Meta: Meta{RequestID: requestID(c), Timestamp: time.Now().UnixMilli()}})
}

// respond writes data in the envelope with a status.
func respond(c *fiber.Ctx, status int, data any) error {
	b, err := envelope(c, data)
	if err != nil {
		return err
	}
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}

// readJSON checks the content type and decodes the body as a JSON object
// with exact numbers. It returns the raw body too (copied: fiber reuses
// it).
func readJSON(c *fiber.Ctx) (map[string]any, []byte, error) {
	if err := requireJSON(c); err != nil {
		return nil, nil, err
	}
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, problem.New(problem.BadRequest, "Request body is required: send a JSON object")
	}
	m, err := platform.DecodeObject(body)
	if err != nil {
		return nil, nil, problem.Wrap(problem.BadRequest, "Malformed JSON body: "+jsonErrText(err), err)
	}
	return m, bytes.Clone(body), nil
}

// requireJSON answers 415 unless the body is declared as JSON.
func requireJSON(c *fiber.Ctx) error {
	ct := c.Get(fiber.HeaderContentType)
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != fiber.MIMEApplicationJSON && !isJSONSuffix(mt)) {
		shown := ct
		if shown == "" {
			shown = "none"
		}
		return problem.Newf(problem.UnsupportedMediaType, "Content-Type must be application/json (got %s)", shown)
	}
	return nil
}

func isJSONSuffix(mt string) bool { return len(mt) > 5 && mt[len(mt)-5:] == "+json" }

func jsonErrText(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	case errors.As(err, &te):
		return "expected a JSON object"
	}
	return err.Error()
}
