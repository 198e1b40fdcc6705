package gateway

import (
	"bytes"
	"mime"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/factline/factline/internal/host/problem"
)

// headerLimit is the transport's read buffer: a request line and headers
// that do not fit are answered 431.
const headerLimit = 4096

// transportError is an error fasthttp met reading a request, before any
// route ran; toProblem words it for the client.
type transportError struct{ err error }

func (e transportError) Error() string { return "read request: " + e.err.Error() }
func (e transportError) Unwrap() error { return e.err }

// hookTransport installs the gateway's answers to what fasthttp and fiber
// would otherwise answer themselves (or not at all): malformed and
// oversized requests, an ambiguous length and methods fiber does not
// know, all as problems through the one error handler.
func (s *Server) hookTransport() {
	srv := s.app.Server()
	srv.ErrorHandler = s.answerTransportError
	srv.HeaderReceived = refuseAmbiguousLength
	srv.Handler = s.guard(srv.Handler)
	for _, m := range s.app.Config().RequestMethods {
		s.methods = append(s.methods, []byte(m))
	}
}

// answerTransportError answers a request fasthttp could not read; fasthttp
// closes the connection after it.
func (s *Server) answerTransportError(fctx *fasthttp.RequestCtx, err error) {
	s.answerUnrouted(fctx, func(*fiber.Ctx) error { return transportError{err} })
}

// refuseAmbiguousLength runs once a request's headers are read, before
// its body. fasthttp keeps the last of several Content-Length headers and
// would wait for a body the client may never send, and it lets
// Transfer-Encoding win over a Content-Length beside it; RFC 9112
// sections 6.1 and 6.3 make the first an error answered with 400 and a
// closed connection, and the second a request the server may refuse and
// must close the connection after. The body is not read (guard answers
// the request) and the connection closes after the answer, so no byte of
// it is taken for a next request.
func refuseAmbiguousLength(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if ambiguousLength(h.RawHeaders()) != "" {
		h.SetContentLength(0) // also drops Transfer-Encoding
		h.SetConnectionClose()
	}
	return fasthttp.RequestConfig{}
}

// ambiguousLength says why a raw header block leaves the body's length
// ambiguous, or "" when it does not: Content-Length values that differ
// (repeats of one value are accepted, as RFC 9110 section 8.6 allows), or
// Transfer-Encoding and Content-Length together.
func ambiguousLength(raw []byte) string {
	var length []byte
	hasLength, conflict, encoded, other := false, false, false, false
	eachRawHeader(raw, func(name, value []byte) {
		switch {
		case bytes.EqualFold(name, []byte(fiber.HeaderContentLength)):
			if !hasLength {
				length, hasLength = value, true
			} else if !bytes.Equal(length, value) {
				conflict = true
			}
		case bytes.EqualFold(name, []byte(fiber.HeaderTransferEncoding)):
			encoded = true
			for _, coding := range bytes.Split(value, []byte{','}) {
				other = other || !bytes.EqualFold(bytes.TrimSpace(coding), []byte("chunked"))
			}
		}
	})
	switch {
	case conflict:
		return "Conflicting Content-Length headers: the request's length is ambiguous"
	case encoded && hasLength:
		return "Transfer-Encoding and Content-Length together: the request's length is ambiguous"
	case other:
		// RFC 9112 section 6.3: only a final chunked coding tells where
		// a request's body ends, and fasthttp decodes no other coding
		// (it would read gzip, chunked as chunked alone).
		return "Transfer-Encoding other than chunked is not supported: the request's length is unknown"
	}
	return ""
}

// eachRawHeader calls fn with the name and value (trimmed) of every line
// of a raw header block. fasthttp keeps one of several Content-Length or
// Content-Type lines, so a repeat is seen only here.
func eachRawHeader(raw []byte, fn func(name, value []byte)) {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if colon := bytes.IndexByte(line, ':'); colon >= 0 {
			fn(bytes.TrimSpace(line[:colon]), bytes.TrimSpace(line[colon+1:]))
		}
	}
}

// differingContentTypes reports whether the raw Content-Type lines of a
// header block name more than one media type (see sameMediaType).
func differingContentTypes(raw []byte) bool {
	var first []byte
	seen, differ := false, false
	eachRawHeader(raw, func(n, v []byte) {
		if !bytes.EqualFold(n, []byte(fiber.HeaderContentType)) {
			return
		}
		if !seen {
			first, seen = v, true
		} else if !sameMediaType(first, v) {
			differ = true
		}
	})
	return differ
}

// sameMediaType reports whether two Content-Type values name one media
// type: media types compared as parsed, type, subtype and parameter names
// regardless of case (RFC 9110 8.3.1), parameter values exactly but for
// charset's, which is case-insensitive too, and quoting or spacing aside.
// A value that does not parse is the same only as its exact twin.
func sameMediaType(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	mtA, pA, errA := mime.ParseMediaType(string(a))
	mtB, pB, errB := mime.ParseMediaType(string(b))
	if errA != nil || errB != nil || mtA != mtB || len(pA) != len(pB) {
		return false
	}
	for k, va := range pA {
		vb, ok := pB[k]
		if !ok || va != vb && !(k == "charset" && strings.EqualFold(va, vb)) {
			return false
		}
	}
	return true
}

// refuseDifferingContentTypes answers 415 for a request body declared
// with Content-Type lines naming different media types: fasthttp keeps
// the last, so text/plain then application/wasm would pass as a module;
// which one the client meant cannot be told. It holds for every body, the
// JSON ones (see requireJSON) and the uploads (plugins, domain manifests)
// alike.
func refuseDifferingContentTypes(c *fiber.Ctx, bodyLen int) error {
	if bodyLen == 0 || !differingContentTypes(c.Request().Header.RawHeaders()) {
		return nil
	}
	return errDifferingContentTypes()
}

func errDifferingContentTypes() error {
	return problem.New(problem.UnsupportedMediaType, "Content-Type is given more than once with different values: send one")
}

// guard wraps fiber's handler: fiber answers a method it does not know
// with a text/plain 400 of its own, and a request of ambiguous length
// must be refused before any route sees it.
func (s *Server) guard(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(fctx *fasthttp.RequestCtx) {
		switch why := ambiguousLength(fctx.Request.Header.RawHeaders()); {
		case why != "":
			fctx.SetConnectionClose()
			s.answerUnrouted(fctx, func(*fiber.Ctx) error {
				return problem.New(problem.BadRequest, why)
			})
		case !s.knownMethod(fctx.Method()):
			s.answerUnrouted(fctx, func(c *fiber.Ctx) error {
				if platformPath(c.Path()) {
					if err := s.authenticate(c); err != nil {
						return err
					}
				}
				return s.routeMiss(c)
			})
		default:
			if s.conns.draining.Load() {
				// Also for a connection served again after fasthttp's
				// shutdown, which then no longer adds it itself.
				fctx.Response.SetConnectionClose()
			}
			next(fctx)
		}
	}
}

// answerUnrouted answers a request no route runs for with the problem
// fail returns, with the request id, log line and metrics of any other.
func (s *Server) answerUnrouted(fctx *fasthttp.RequestCtx, fail func(*fiber.Ctx) error) {
	c := s.app.AcquireCtx(fctx)
	defer s.app.ReleaseCtx(c)
	c.Locals(localRoutePattern, "unmatched")
	_ = s.observed(c, func() error { return fail(c) })
}

func (s *Server) knownMethod(m []byte) bool {
	for _, k := range s.methods {
		if bytes.Equal(k, m) {
			return true
		}
	}
	return false
}
