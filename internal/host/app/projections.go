package app

import (
	"context"

	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/projector"
)

// projectionStatePrefix starts every cached-state key of projections in
// Redis.
const projectionStatePrefix = "factline:projection:"

// projectionMarkerPrefix starts the keys that mark a projection's cached
// state as built from the first fact (outside the state's prefix, which
// belongs to the engine).
const projectionMarkerPrefix = "factline:projector:built:"

// newProjector builds the projection service on Redis when a Redis URL is
// configured, else on in-process state. The Redis client is its own: the
// rate limiter's fails fast on the request path, while projection updates
// may wait and retry.
func (a *App) newProjector(_ context.Context) (*projector.Service, error) {
	var state projection.CachedState
	var marker projector.Marker // in process unless on Redis
	if a.cfg.RedisURL != "" {
		rc, err := parseRedisURL(a.cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		// Updates run without a deadline and may wait and retry; queries
		// bound their reads (projector.Options.StateTimeout).
		client := rc.honouringContext().client()
		a.closers = append(a.closers, func() { _ = client.Close() })
		rs := projection.NewRedisState(client)
		a.closers = append(a.closers, func() { _ = rs.Close() }) // before the client's
		state = rs.WithPrefix(projectionStatePrefix)
		marker = projector.NewRedisMarker(client, projectionMarkerPrefix)
	} else {
		state = projection.NewMemoryState().WithPrefix(projectionStatePrefix)
	}
	return projector.New(projector.Options{
		Store:       a.Store,
		State:       state,
		Marker:      marker,
		EntityTypes: func() []string { return a.Platform.Domain().EntityTypeNames() },
		FactTypes: func(entityType string) []string {
			if t := a.Platform.Domain().Entities[entityType]; t != nil {
				return t.Facts
			}
			return nil
		},
		Logger:         a.cfg.Logger,
		TracerProvider: a.cfg.TracerProvider,
		Metrics:        a.Stream,
	})
}
