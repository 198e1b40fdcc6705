package app

import (
	"context"

	"github.com/factline/factline/host/projection"
	"github.com/factline/factline/host/projector"
)

// projectionStatePrefix starts every cached-state key of projections in
// Redis.
const projectionStatePrefix = "factline:projection:"

// newProjector builds the projection service on Redis when a Redis URL is
// configured, else on in-process state. The Redis client is its own: the
// rate limiter's fails fast on the request path, while projection updates
// may wait and retry.
func (a *App) newProjector(_ context.Context) (*projector.Service, error) {
	var state projection.CachedState
	if a.cfg.RedisURL != "" {
		rc, err := parseRedisURL(a.cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		client := rc.client()
		a.closers = append(a.closers, func() { _ = client.Close() })
		rs := projection.NewRedisState(client)
		a.closers = append(a.closers, func() { _ = rs.Close() }) // before the client's
		state = rs.WithPrefix(projectionStatePrefix)
	} else {
		state = projection.NewMemoryState().WithPrefix(projectionStatePrefix)
	}
	return projector.New(projector.Options{
		Store:       a.Store,
		State:       state,
		EntityTypes: func() []string { return a.Platform.Domain().EntityTypeNames() },
		Logger:      a.cfg.Logger,
		Metrics:     a.Stream,
	})
}
