package projector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/store"
)

// ConfigType is the platform config type of projections.
const ConfigType = projection.VersionedType

// ScopePlatform is the only scope of a projection config (the versioned
// wrapper's scope).
const ScopePlatform = projection.VersionedScope

// RegisterConfigType makes p validate projection configs (POST /v1/configs
// with type projection, and every new version).
func (s *Service) RegisterConfigType(p *platform.Service) {
	p.RegisterConfigCheck(ConfigType, s.checkConfig)
}

// checkConfig validates the settings form of a projection (every issue
// the engine's validator finds, as field errors), the scope, that source
// names a declared entity type and that the name is not taken by another
// active projection of the tenant (queries find projections by name).
func (s *Service) checkConfig(ctx context.Context, tenant string, in *platform.ConfigInput, _ bool) []problem.FieldError {
	var errs []problem.FieldError
	_, ferrs := parseSettings(in.Settings)
	errs = append(errs, ferrs...)
	switch in.ScopeType {
	case "", ScopePlatform:
		in.ScopeType = ScopePlatform
	default:
		errs = append(errs, problem.FieldError{Field: "scope_type", Code: problem.CodeEnum,
			Message: "scope_type of a projection must be platform (or omitted)"})
	}
	// Checked even when other settings are wrong, so every problem shows.
	if source, ok := in.Settings["source"].(string); ok && source != "" && s.opts.EntityTypes != nil {
		known := s.opts.EntityTypes()
		if !contains(known, source) {
			errs = append(errs, problem.FieldError{Field: "settings.source", Code: problem.CodeEnum,
				Message: fmt.Sprintf("source %q is not a declared entity type (declared: %s)", source, strings.Join(known, ", "))})
		} else if s.opts.FactTypes != nil {
			// A fact type the source does not declare is never recorded on
			// it: the projection would count nothing, silently.
			declared := s.opts.FactTypes(source)
			types, _ := in.Settings["factTypes"].([]any)
			for i, v := range types {
				if t, ok := v.(string); ok && t != "" && !slices.Contains(declared, t) {
					errs = append(errs, problem.FieldError{Field: fmt.Sprintf("settings.factTypes[%d]", i), Code: problem.CodeEnum,
						Message: fmt.Sprintf("entity type %s declares no fact type %q (declared: %s)", source, t, strings.Join(declared, ", "))})
				}
			}
		}
	}
	if in.Name != "" && id.HasPrefix(in.Name, id.Config) {
		// A query names a projection by id or by name, the id first.
		errs = append(errs, problem.FieldError{Field: "name", Code: problem.CodeFormat,
			Message: fmt.Sprintf("name %q has the form of a config id; queries would take it for one", in.Name)})
	} else if in.Name != "" {
		other, err := s.findByName(ctx, tenant, in.Name)
		switch {
		case err != nil:
			s.log.Warn("projection: cannot check that the name is free", "tenant", tenant, "name", in.Name, "err", err)
		case other != nil && other.ID != in.ID:
			errs = append(errs, problem.FieldError{Field: "name", Code: problem.CodeFormat,
				Message: fmt.Sprintf("name %q is already used by projection %s; names identify projections in queries", in.Name, other.ID)})
		}
		// A query takes the id first: a name that is another projection's
		// id would never be reached.
		if in.Name != in.ID {
			if c, err := s.opts.Store.GetConfig(ctx, tenant, in.Name); err == nil && c.Type == ConfigType && c.Status == store.ConfigActive {
				errs = append(errs, problem.FieldError{Field: "name", Code: problem.CodeFormat,
					Message: fmt.Sprintf("name %q is the id of projection %s; queries would take it for that one", in.Name, c.ID)})
			}
		}
	}
	// Likewise an id that is another projection's name would hide it.
	if in.ID != "" && in.ID != in.Name {
		if other, err := s.findByName(ctx, tenant, in.ID); err == nil && other != nil && other.ID != in.ID {
			errs = append(errs, problem.FieldError{Field: "id", Code: problem.CodeFormat,
				Message: fmt.Sprintf("id %q is the name of projection %s; queries would no longer reach that one by name", in.ID, other.ID)})
		}
	}
	return errs
}

// parseSettings runs the engine's parser on a settings object and returns
// field errors named "settings.<path>".
func parseSettings(settings map[string]any) (*projection.Config, []problem.FieldError) {
	src, err := json.Marshal(settings)
	if err != nil {
		return nil, []problem.FieldError{{Field: "settings", Code: problem.CodeType, Message: "settings must be a JSON object"}}
	}
	cfg, err := projection.ParseSettings(src)
	if err == nil {
		return cfg, nil
	}
	var verr *projection.ConfigValidationError
	if errors.As(err, &verr) {
		out := make([]problem.FieldError, 0, len(verr.Details))
		for _, d := range verr.Details {
			field := "settings"
			if d.Path != "" {
				field += "." + d.Path
			}
			code := problem.CodeFormat
			if d.Missing {
				code = problem.CodeRequired
			}
			out = append(out, problem.FieldError{Field: field, Code: code, Message: d.Message})
		}
		return nil, out
	}
	return nil, []problem.FieldError{{Field: "settings", Code: problem.CodeFormat, Message: err.Error()}}
}

// compiled is a stored config version ready to run.
type compiled struct {
	cfg       store.Config
	versioned *projection.VersionedConfig
	// fingerprint identifies how facts aggregate; equal fingerprints share
	// cached state.
	fingerprint string
}

func compile(c *store.Config) (*compiled, error) {
	var settings map[string]any
	dec := json.NewDecoder(strings.NewReader(string(c.Settings)))
	dec.UseNumber()
	if err := dec.Decode(&settings); err != nil {
		return nil, fmt.Errorf("projection %s v%d: settings: %w", c.ID, c.Version, err)
	}
	cfg, ferrs := parseSettings(settings)
	if len(ferrs) > 0 {
		return nil, fmt.Errorf("projection %s v%d: %s: %s", c.ID, c.Version, ferrs[0].Field, ferrs[0].Message)
	}
	vc := &projection.VersionedConfig{ID: c.ID, Type: projection.VersionedType, Scope: projection.VersionedScope,
		Version: int(c.Version), TenantID: c.TenantID, Settings: cfg, EffectiveAt: c.EffectiveAt}
	if err := vc.Validate(); err != nil {
		return nil, fmt.Errorf("projection %s v%d: %w", c.ID, c.Version, err)
	}
	return &compiled{cfg: *c, versioned: vc, fingerprint: fingerprint(cfg)}, nil
}

// fingerprint hashes the settings that decide how facts aggregate:
// everything but storageVersion, whose change the engine migrates in place.
func fingerprint(cfg *projection.Config) string {
	c := cfg.Clone()
	c.StorageVersion = 0
	b, _ := json.Marshal(c)
	// Distinct counts became exact in base buckets: state kept before
	// that holds sketches only, so such a projection is rebuilt under a
	// new key rather than mixing the two.
	for _, a := range c.Aggregations {
		if a.Function == projection.CountDistinct {
			b = append(b, "\x00distinct:values"...)
			break
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// findByName returns the active projection config of the tenant with the
// name, the oldest when several have it; nil when none.
func (s *Service) findByName(ctx context.Context, tenant, name string) (*store.Config, error) {
	var found *store.Config
	after := ""
	for {
		page, err := s.opts.Store.ListConfigs(ctx, store.ConfigFilter{TenantID: tenant, Type: ConfigType, Status: store.ConfigActive, AfterID: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		for i := range page {
			c := page[i]
			if c.Name == name && (found == nil || c.CreatedAt < found.CreatedAt) {
				found = &c
			}
		}
		if len(page) < 500 {
			return found, nil
		}
		after = page[len(page)-1].ID
	}
}

func contains(list []string, s string) bool {
	i := sort.SearchStrings(list, s)
	return i < len(list) && list[i] == s
}
