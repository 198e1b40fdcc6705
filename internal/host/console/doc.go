// Package console serves the operator console and webhook portal at
// /console on the gateway's listener: server-rendered pages over the
// public HTTP API.
//
// Signing in exchanges an API key for a server-side session kept in the
// store, so every process sharing the database serves it. The session
// keeps the key sealed; each console request rechecks it with the API's
// authenticator and every read and write is dispatched to the API's own
// handlers with it, so the console can do nothing the key cannot do
// through the API. Writes need the session's CSRF token.
package console
