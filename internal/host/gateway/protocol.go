package gateway

import (
	"bytes"

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
// oversized requests, conflicting Content-Length headers and methods fiber
// does not know, all as problems through the one error handler.
func (s *Server) hookTransport() {
	srv := s.app.Server()
	srv.ErrorHandler = s.answerTransportError
	srv.HeaderReceived = refuseConflictingLength
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

// refuseConflictingLength runs once a request's headers are read, before
// its body. fasthttp keeps the last of several Content-Length headers and
// would wait for a body the client may never send; RFC 9112 section 6.3
// makes such framing an error answered with 400 and a closed connection.
// The body is not read (guard answers the request) and the connection
// closes after the answer, so no byte of it is taken for a next request.
func refuseConflictingLength(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if conflictingLength(h.RawHeaders()) {
		h.SetContentLength(0)
		h.SetConnectionClose()
	}
	return fasthttp.RequestConfig{}
}

// conflictingLength reports whether a raw header block carries
// Content-Length values that differ. Repeats of one value are accepted,
// as RFC 9110 section 8.6 allows.
func conflictingLength(raw []byte) bool {
	var first []byte
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 || !bytes.EqualFold(bytes.TrimSpace(line[:colon]), []byte(fiber.HeaderContentLength)) {
			continue
		}
		v := bytes.TrimSpace(line[colon+1:])
		if first == nil {
			first = v
		} else if !bytes.Equal(first, v) {
			return true
		}
	}
	return false
}

// guard wraps fiber's handler: fiber answers a method it does not know
// with a text/plain 400 of its own, and conflicting Content-Length
// headers must be refused before any route sees the request.
func (s *Server) guard(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(fctx *fasthttp.RequestCtx) {
		switch {
		case conflictingLength(fctx.Request.Header.RawHeaders()):
			fctx.SetConnectionClose()
			s.answerUnrouted(fctx, func(*fiber.Ctx) error {
				return problem.New(problem.BadRequest, "Conflicting Content-Length headers: the request's length is ambiguous")
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
