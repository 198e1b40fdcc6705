// Package gateway is Factline's HTTP front: a fiber v2 app that serves the
// platform /v1 API, health, metrics and the routes of a gateway manifest.
//
// Handlers return errors; one error handler turns every error (including
// fiber's own 404, 405 and 413) into an RFC 7807 problem, so no handler
// writes an error body itself. Successful responses use the {data, meta}
// envelope. "The contract" in this package is the API README.md states
// ("The platform API").
//
// fiber reuses request memory after a handler returns: values that outlive
// a handler are copied, and no fiber context is handed to the store; each
// request gets its own context.Context with a deadline instead.
package gateway
