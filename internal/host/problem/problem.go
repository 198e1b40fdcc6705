// Package problem defines the RFC 7807 problem details every Factline error
// becomes on the wire, and the catalogue of slugs, titles and statuses fixed
// by the contract (README.md, "The platform API"; each slug is explained
// at /errors/{slug}).
//
// Handlers and services return errors; one place (the HTTP error handler)
// turns them into problems with [From], so no handler writes an error body
// itself.
package problem

import (
	"errors"
	"fmt"
	"net/http"
)

// ContentType is the media type of every error response.
const ContentType = "application/problem+json"

// Kind is one entry of the problem catalogue.
type Kind struct {
	Status int
	Slug   string
	Title  string
}

// Explanation returns the human explanation of a kind, served at
// {docs_url}/errors/<slug>.
func (k Kind) Explanation() string { return explanations[k.Slug] }

var explanations = map[string]string{
	"bad-request":            "The request could not be understood: a required query parameter is missing (for example entity_type), an entity type is unknown, or the JSON body is malformed. The detail names what is wrong. Fix the request; retrying it unchanged fails the same way.",
	"validation-failed":      "The request body is well-formed JSON but breaks the rules of the action or the domain manifest. The errors array lists every offending field with a code (required, type, enum, unknown_field, format, range) and a message. Fix every listed field and send the request again.",
	"unauthorized":           "The X-API-Key header is missing, malformed, unknown or revoked. Send a valid key for your tenant; keys are created with `factline keys create` or POST /v1/admin/keys.",
	"forbidden":              "The key is valid but its mode may not use this endpoint; admin endpoints need an admin key.",
	"not-found":              "Nothing with this id exists in your tenant, or no route matches the path. Ids of other tenants are reported as not found, never as forbidden.",
	"method-not-allowed":     "The path exists but does not accept this HTTP method. The Allow header lists the methods it accepts.",
	"conflict":               "The change is based on a stale version (optimistic concurrency), the id is already taken, the config is archived, or a request with the same Idempotency-Key is still running. Re-read the resource and retry with its current version.",
	"payload-too-large":      "The request body is larger than the server accepts (the --body-limit setting). Send a smaller body.",
	"unsupported-media-type": "Request bodies must be JSON: send Content-Type: application/json.",
	"unprocessable":          "The request is valid but cannot be carried out: the entity's ledger refused the command under its business rules, or an Idempotency-Key was reused with a different body.",
	"rate-limit-exceeded":    "The route's rate limit is used up. Wait the number of seconds in the Retry-After header before the next request.",
	"internal":               "Something failed inside the server. Nothing about the cause is shown; quote the trace_id to the operator, who finds the cause in the logs under that request id.",
	"unavailable":            "A dependency the server needs (the database, the cache) is not answering. Retry later; /health shows which check fails.",
	"timeout":                "The request's work overran its deadline and was abandoned. Retry later; a write may or may not have taken effect, so use an Idempotency-Key for safe retries.",

	// Answered by the transport, before any route runs.
	"request-header-fields-too-large": "The request line and headers together are larger than the server reads (4096 bytes). Send fewer or shorter headers; the connection is closed after this answer.",
	"request-timeout":                 "The request's headers or body did not arrive whole within the server's request timeout (30 s by default). Send the request again at once; the connection is closed after this answer and nothing of the request was carried out.",
}

// The catalogue. Slugs and titles are part of the contract.
var (
	BadRequest           = Kind{http.StatusBadRequest, "bad-request", "Bad Request"}
	ValidationFailed     = Kind{http.StatusBadRequest, "validation-failed", "Validation Failed"}
	Unauthorized         = Kind{http.StatusUnauthorized, "unauthorized", "Unauthorized"}
	Forbidden            = Kind{http.StatusForbidden, "forbidden", "Forbidden"}
	NotFound             = Kind{http.StatusNotFound, "not-found", "Not Found"}
	MethodNotAllowed     = Kind{http.StatusMethodNotAllowed, "method-not-allowed", "Method Not Allowed"}
	Conflict             = Kind{http.StatusConflict, "conflict", "Conflict"}
	PayloadTooLarge      = Kind{http.StatusRequestEntityTooLarge, "payload-too-large", "Payload Too Large"}
	UnsupportedMediaType = Kind{http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported Media Type"}
	Unprocessable        = Kind{http.StatusUnprocessableEntity, "unprocessable", "Unprocessable Entity"}
	RateLimitExceeded    = Kind{http.StatusTooManyRequests, "rate-limit-exceeded", "Too Many Requests"}
	Internal             = Kind{http.StatusInternalServerError, "internal", "Internal Server Error"}
	Unavailable          = Kind{http.StatusServiceUnavailable, "unavailable", "Service Unavailable"}
	Timeout              = Kind{http.StatusGatewayTimeout, "timeout", "Gateway Timeout"}

	// HeadersTooLarge is answered by the transport to a request whose
	// headers do not fit its read buffer.
	HeadersTooLarge = Kind{http.StatusRequestHeaderFieldsTooLarge, "request-header-fields-too-large", "Request Header Fields Too Large"}
	// RequestTimeout is answered by the transport to a request that did
	// not arrive whole within the request timeout (a slow or stalled
	// client), as against Timeout, the server's own work running late.
	RequestTimeout = Kind{http.StatusRequestTimeout, "request-timeout", "Request Timeout"}
)

// Catalogue lists every kind, for documentation pages and tests.
var Catalogue = []Kind{
	BadRequest, ValidationFailed, Unauthorized, Forbidden, NotFound,
	MethodNotAllowed, Conflict, PayloadTooLarge, UnsupportedMediaType,
	Unprocessable, RateLimitExceeded, Internal, Unavailable, Timeout,
	HeadersTooLarge, RequestTimeout,
}

// FieldError is one field-level validation error.
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Field error codes.
const (
	CodeRequired     = "required"
	CodeType         = "type"
	CodeEnum         = "enum"
	CodeUnknownField = "unknown_field"
	CodeFormat       = "format"
	CodeRange        = "range"
)

// Error is an error that knows its problem kind and detail text. It is the
// only error type that reaches clients with its detail; anything else is
// reported as an internal error without internals.
type Error struct {
	Kind   Kind
	Detail string
	Errors []FieldError
	// Headers are set on the response (for example Retry-After).
	Headers map[string]string
	// Err is the underlying cause, logged but never shown.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind.Slug, e.Detail, e.Err)
	}
	return e.Kind.Slug + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// New returns a problem error of kind k with a detail text.
func New(k Kind, detail string) *Error { return &Error{Kind: k, Detail: detail} }

// Newf is New with a formatted detail.
func Newf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns a problem error of kind k with a detail, keeping cause for
// logs.
func Wrap(k Kind, detail string, cause error) *Error {
	return &Error{Kind: k, Detail: detail, Err: cause}
}

// Validation returns the contract's validation-failed problem listing every
// field error.
func Validation(errs []FieldError) *Error {
	return &Error{Kind: ValidationFailed, Detail: "Request validation failed", Errors: errs}
}

// From finds the problem error in err's chain; any other error becomes an
// internal problem whose detail reveals nothing.
func From(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Kind: Internal, Detail: "An internal error occurred; quote the trace_id when reporting it", Err: err}
}

// Body is the JSON body of a problem response.
type Body struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail"`
	Instance string       `json:"instance"`
	Errors   []FieldError `json:"errors,omitempty"`
	TraceID  string       `json:"trace_id,omitempty"`
}

// Body renders e for a request id. docsURL is the base of the type URI,
// without a trailing slash.
func (e *Error) Body(docsURL, requestID string) Body {
	return Body{
		Type:     docsURL + "/errors/" + e.Kind.Slug,
		Title:    e.Kind.Title,
		Status:   e.Kind.Status,
		Detail:   e.Detail,
		Instance: "/errors/" + requestID,
		Errors:   e.Errors,
		TraceID:  requestID,
	}
}

// ForStatus returns the catalogue kind for an HTTP status, falling back to
// Internal for 5xx and BadRequest for other 4xx.
func ForStatus(status int) Kind {
	for _, k := range Catalogue {
		if k.Status == status && k.Slug != ValidationFailed.Slug {
			return k
		}
	}
	if status >= 500 {
		return Internal
	}
	return BadRequest
}
