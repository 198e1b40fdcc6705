package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
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
	meta := Meta{RequestID: requestID(c), Timestamp: time.Now().UnixMilli()}
	if v, ok := data.(platform.EntityView); ok {
		n := 256 + len(v.ID) + len(v.Type) + len(v.TenantID) + len(v.Data) + len(v.Metadata) + len(meta.RequestID)
		if b, ok := appendEntityEnvelope(make([]byte, 0, n), &v, meta); ok {
			return b, nil
		}
	}
	return jsonMarshal(Envelope{Data: data, Meta: meta})
}

// appendEntityEnvelope renders the envelope of an entity, the body of
// every entity read, byte for byte as jsonMarshal does, without its
// reflection. ok is false when a string would need escaping (jsonMarshal
// then does it) or a JSON field is malformed.
func appendEntityEnvelope(b []byte, v *platform.EntityView, m Meta) (_ []byte, ok bool) {
	b = append(b, `{"data":{"id":`...)
	if b, ok = appendPlainString(b, v.ID); !ok {
		return nil, false
	}
	b = append(b, `,"type":`...)
	if b, ok = appendPlainString(b, v.Type); !ok {
		return nil, false
	}
	b = append(b, `,"tenant_id":`...)
	if b, ok = appendPlainString(b, v.TenantID); !ok {
		return nil, false
	}
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, v.Version, 10)
	b = append(b, `,"data":`...)
	if b, ok = appendCompact(b, v.Data); !ok {
		return nil, false
	}
	b = append(b, `,"metadata":`...)
	if b, ok = appendCompact(b, v.Metadata); !ok {
		return nil, false
	}
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, v.CreatedAt, 10)
	b = append(b, `,"updated_at":`...)
	b = strconv.AppendInt(b, v.UpdatedAt, 10)
	b = append(b, `},"meta":{"request_id":`...)
	if b, ok = appendPlainString(b, m.RequestID); !ok {
		return nil, false
	}
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, m.Timestamp, 10)
	return append(b, `}}`...), true
}

// appendPlainString appends s quoted when encoding/json would write it
// unchanged: printable ASCII other than " and \.
func appendPlainString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// appendCompact appends a JSON value as encoding/json writes a
// json.RawMessage: compacted; null when nil.
func appendCompact(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
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
	m, raw, _, err := readJSONShape(c)
	return m, raw, err
}

// utf8BOM is the byte order mark, which RFC 8259 forbids a JSON text to
// begin with.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// readJSONShape is readJSON that also returns the body's shape. Every
// string, key and number of the body is checked against what the stores
// can hold (store.Inspect reads the raw bytes, before the decoder turns
// invalid UTF-8 into U+FFFD); each bad one is a field error named by its
// JSON path, and nothing is written.
func readJSONShape(c *fiber.Ctx) (map[string]any, []byte, store.Shape, error) {
	if err := requireJSON(c); err != nil {
		return nil, nil, store.Shape{}, err
	}
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, store.Shape{}, problem.New(problem.BadRequest, "Request body is required: send a JSON object")
	}
	if bytes.HasPrefix(body, utf8BOM) {
		// encoding/json's words for it name the first byte as a Latin-1
		// letter ("invalid character 'ï'").
		return nil, nil, store.Shape{}, problem.New(problem.BadRequest, "Malformed JSON body: it starts with a byte order mark (EF BB BF); send the JSON without it")
	}
	m, err := platform.DecodeObject(body)
	if err != nil {
		return nil, nil, store.Shape{}, problem.Wrap(problem.BadRequest, "Malformed JSON body: "+jsonErrText(err), err)
	}
	shape := store.Inspect(body, "")
	if len(shape.Bad) > 0 {
		return nil, nil, shape, invalidInput(shape.Bad)
	}
	return m, bytes.Clone(body), shape, nil
}

// invalidInput is the validation problem listing values the stores cannot
// hold, one error per field.
func invalidInput(bad []*store.InvalidInputError) error {
	errs := make([]problem.FieldError, 0, len(bad))
	seen := map[string]bool{}
	for _, b := range bad {
		if !seen[b.Field] {
			seen[b.Field] = true
			errs = append(errs, invalidField(b))
		}
	}
	sortFieldErrors(errs)
	return problem.Validation(errs)
}

func invalidField(b *store.InvalidInputError) problem.FieldError {
	code := problem.CodeFormat
	if b.Reason == store.ReasonNumber {
		code = problem.CodeRange
	}
	return problem.FieldError{Field: b.Field, Code: code, Message: b.Error()}
}

// requireJSON answers 415 unless the body is declared as JSON.
func requireJSON(c *fiber.Ctx) error {
	// fasthttp keeps the last of several Content-Type lines: differing
	// ones leave the body's media type open, refused like one that is not
	// JSON. Repeats of one value are one type.
	if differingContentTypes(c.Request().Header.RawHeaders()) {
		return errDifferingContentTypes()
	}
	ct := c.Get(fiber.HeaderContentType)
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != fiber.MIMEApplicationJSON && !isJSONSuffix(mt)) {
		shown := ct
		if shown == "" {
			shown = "none"
		}
		return problem.Newf(problem.UnsupportedMediaType, "Content-Type must be application/json (got %s)", shown)
	}
	// JSON is UTF-8 (RFC 8259); a body declared in another charset would
	// be read as UTF-8 all the same, and its text changed.
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return problem.Newf(problem.UnsupportedMediaType, "JSON bodies are UTF-8: charset %s is not accepted", cs)
	}
	return nil
}

func isJSONSuffix(mt string) bool { return len(mt) > 5 && mt[len(mt)-5:] == "+json" }

// maxJSONDepth is encoding/json's nesting limit, which it does not export.
const maxJSONDepth = 10000

func jsonErrText(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se) && strings.HasSuffix(se.Error(), "exceeded max depth"):
		// encoding/json's words for its nesting limit read as a bug.
		return fmt.Sprintf("nested more than %d levels deep at byte %d", maxJSONDepth, se.Offset)
	case errors.As(err, &se):
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	case errors.As(err, &te):
		return "expected a JSON object"
	}
	return err.Error()
}
