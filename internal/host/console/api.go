package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/factline/factline/internal/host/gateway"
)

// API serves one request with the gateway's own handlers (for example the
// fiber app's Test method): the console's reads and writes go through the
// same routes, key check, rate limits and validation as any API client.
type API func(req *http.Request) (*http.Response, error)

// apiError is a problem+json answer of the API, shown in the page.
type apiError struct {
	Status int          `json:"status"`
	Title  string       `json:"title"`
	Detail string       `json:"detail"`
	Errors []fieldError `json:"errors"`
	// TraceID is the failed request's id, to quote in a report.
	TraceID string `json:"trace_id"`
}

// fieldError is one entry of a problem's errors.
type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Title, e.Detail) }

// call sends one API request with the session's key and decodes the
// envelope's data into out (when not nil). A problem answer is an
// *apiError.
func (c *Console) call(ctx context.Context, s *session, method, path, contentType string, body []byte, out any) error {
	_, err := c.callStatus(ctx, s, method, path, contentType, body, out)
	return err
}

// callStatus is call that also returns the API's status, for writes whose
// 200 and 201 mean different things (an install of what already serves).
func (c *Console) callStatus(ctx context.Context, s *session, method, path, contentType string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://console.internal"+path, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("console: build %s %s: %w", method, path, err)
	}
	req.Header.Set(gateway.HeaderAPIKey, s.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.opts.API(req)
	if err != nil {
		return 0, fmt.Errorf("console: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("console: read %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		pe := &apiError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			_ = json.Unmarshal(raw, pe)
		}
		return resp.StatusCode, pe
	}
	if out == nil {
		return resp.StatusCode, nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return resp.StatusCode, fmt.Errorf("console: decode %s %s: %w", method, path, err)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("console: decode %s %s: %w", method, path, err)
	}
	return resp.StatusCode, nil
}
