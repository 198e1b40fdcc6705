package projector

import (
	"context"

	"github.com/factline/factline/internal/host/store"
)

// GroupMembers names the runtimes the shared stream reader feeds now, so
// tests wait for a join instead of sleeping.
func (s *Service) GroupMembers() []string { return s.group.Members() }

// Decodes counts the facts the runtimes have decoded so far.
func (s *Service) Decodes() int64 { return s.decoded.decodes.Load() }

// ApplyConfig applies one config version as a sync that listed it would.
func (s *Service) ApplyConfig(ctx context.Context, c *store.Config) { s.apply(ctx, c) }
