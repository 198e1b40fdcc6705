package platform

import (
	"errors"

	"github.com/factline/factline/internal/host/problem"
)

// refusals are the problems the platform answers an input with when a
// rule of the domain refuses it; every other error is a failure to apply
// it (the store down, a timeout, a fault).
var refusals = map[string]bool{
	problem.BadRequest.Slug:       true, // an unknown entity type, a missing parameter
	problem.ValidationFailed.Slug: true, // fields that break the manifest
	problem.NotFound.Slug:         true, // no such entity, fact or config
	problem.Conflict.Slug:         true, // a stale version, a taken id, an archived config
	problem.Unprocessable.Slug:    true, // a ledger's business rule
}

// Refusal returns the problem when err is the platform refusing an input
// by a rule of the domain rather than failing to apply it. Callers other
// than the HTTP error handler (subscriptions applying a plugin's actions)
// branch on it instead of on a status code.
func Refusal(err error) (*problem.Error, bool) {
	var pe *problem.Error
	if errors.As(err, &pe) && refusals[pe.Kind.Slug] {
		return pe, true
	}
	return nil, false
}
