package platform

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// ConfigValidator checks the settings of one config type (for example
// "webhook" or "projection") and returns every field error found. It may
// normalise settings (apply defaults) by returning a replacement map. Field
// names are relative to settings; the platform prefixes them "settings.".
type ConfigValidator func(settings map[string]any) (map[string]any, []problem.FieldError)

// ConfigCheck validates a whole config input of one type: settings, name and
// scope. It runs when a config is created (creating true) and for every new
// version, with the input that version would store (on update, name and
// scope already default to the current version's), and it may change in:
// apply defaults, normalise settings, set a default scope. Field names in
// the errors it returns are those of the request body ("settings.url",
// "scope_id"). It is not called when settings is missing.
type ConfigCheck func(ctx context.Context, tenant string, in *ConfigInput, creating bool) []problem.FieldError

// RegisterConfigType installs the settings validator of a config type.
// Types without a validator accept any settings object. Call before
// serving.
func (s *Service) RegisterConfigType(typ string, v ConfigValidator) {
	s.configs[typ] = func(_ context.Context, _ string, in *ConfigInput, _ bool) []problem.FieldError {
		normalised, ferrs := v(in.Settings)
		for i := range ferrs {
			ferrs[i].Field = "settings." + ferrs[i].Field
		}
		if normalised != nil {
			in.Settings = normalised
		}
		return ferrs
	}
}

// RegisterConfigCheck installs a check that sees the whole config input of
// a type (it replaces a validator registered for the same type). Call
// before serving.
func (s *Service) RegisterConfigCheck(typ string, c ConfigCheck) { s.configs[typ] = c }

var (
	configTypeRe = regexp.MustCompile(`^[a-z][a-z0-9_.\-]{0,63}$`)
	scopeTypeRe  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

// ConfigInput creates a config or a new version of one.
type ConfigInput struct {
	// ID names the config: on create, the new id (generated when empty);
	// on update, set by the platform to the config being updated.
	ID        string
	Type      string // create only
	Name      string
	ScopeType string // default "tenant"
	ScopeID   string
	Settings  map[string]any
	// EffectiveAt (ms) defaults to the creation time.
	EffectiveAt int64
	// ExpectedVersion (update only), when non-zero, must be the current
	// version.
	ExpectedVersion int64
}

func (s *Service) checkConfig(ctx context.Context, tenant string, in *ConfigInput, creating bool) error {
	if errs := s.configErrors(ctx, tenant, in, creating); len(errs) > 0 {
		return problem.Validation(errs)
	}
	return nil
}

// ConfigInputErrors returns every field error CreateConfig (configID
// empty) or UpdateConfig of configID would report for in, without
// writing. It returns an error only when the config to update cannot be
// read.
func (s *Service) ConfigInputErrors(ctx context.Context, tenant, configID string, in ConfigInput) ([]problem.FieldError, error) {
	if configID == "" {
		return s.configErrors(ctx, tenant, &in, true), nil
	}
	cur, err := s.GetConfig(ctx, tenant, configID)
	if err != nil {
		return nil, err
	}
	inheritConfig(&in, cur, configID)
	return s.configErrors(ctx, tenant, &in, false), nil
}

// inheritConfig fills a new version's input with what it keeps of the
// current version.
func inheritConfig(in *ConfigInput, cur *store.Config, configID string) {
	in.Type, in.ID = cur.Type, configID
	// A scope_id alone moves the config to another scope of the type it
	// has; neither keeps its scope.
	if in.ScopeType == "" {
		in.ScopeType = cur.ScopeType
		if in.ScopeID == "" {
			in.ScopeID = cur.ScopeID
		}
	}
	if in.Name == "" {
		in.Name = cur.Name
	}
}

func (s *Service) configErrors(ctx context.Context, tenant string, in *ConfigInput, creating bool) []problem.FieldError {
	var errs []problem.FieldError
	if creating {
		switch {
		case in.Type == "":
			errs = append(errs, problem.FieldError{Field: "type", Code: problem.CodeRequired, Message: "type is required"})
		case !configTypeRe.MatchString(in.Type):
			errs = append(errs, problem.FieldError{Field: "type", Code: problem.CodeFormat, Message: "type must be 1-64 characters: a lowercase letter, then lowercase letters, digits, _ . and -"})
		}
		if in.ID != "" && !clientIDRe.MatchString(in.ID) {
			errs = append(errs, problem.FieldError{Field: "id", Code: problem.CodeFormat, Message: "id must be 1-128 characters of letters, digits and _ . : -"})
		}
	}
	if in.Settings == nil {
		errs = append(errs, problem.FieldError{Field: "settings", Code: problem.CodeRequired, Message: "settings is required and must be an object"})
	} else if check, ok := s.configs[in.Type]; ok {
		errs = append(errs, check(ctx, tenant, in, creating)...)
	}
	if in.ScopeType == "" {
		in.ScopeType = "tenant"
	} else if !scopeTypeRe.MatchString(in.ScopeType) {
		errs = append(errs, problem.FieldError{Field: "scope_type", Code: problem.CodeFormat, Message: "scope_type must be 1-32 characters: a lowercase letter, then lowercase letters, digits and _ (for example global, tenant, account)"})
	}
	if in.EffectiveAt < 0 {
		errs = append(errs, problem.FieldError{Field: "effective_at", Code: problem.CodeRange, Message: "effective_at must be milliseconds since the epoch"})
	}
	if utf8.RuneCountInString(in.Name) > MaxNameLength {
		errs = append(errs, problem.FieldError{Field: "name", Code: problem.CodeRange, Message: fmt.Sprintf("name must be at most %d characters", MaxNameLength)})
	}
	return errs
}

// MaxNameLength bounds the name of a config or an API key: a label for
// people, shown in lists and the console.
const MaxNameLength = 200

// CreateConfig stores version 1 of a new config, status active.
func (s *Service) CreateConfig(ctx context.Context, tenant string, in ConfigInput) (*store.Config, error) {
	if err := s.checkConfig(ctx, tenant, &in, true); err != nil {
		return nil, err
	}
	if in.ID == "" {
		in.ID = id.New(id.Config)
	}
	now := s.nowMS()
	if in.EffectiveAt == 0 {
		in.EffectiveAt = now
	}
	c := &store.Config{TenantID: tenant, ID: in.ID, Version: 1, Type: in.Type, Name: in.Name, ScopeType: in.ScopeType, ScopeID: in.ScopeID,
		Settings: docJSON(in.Settings), Status: store.ConfigActive, EffectiveAt: in.EffectiveAt, CreatedAt: now}
	if err := s.store.CreateConfig(ctx, c); err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			return nil, problem.Newf(problem.Conflict, "Config %s already exists", in.ID)
		}
		return nil, storeErr("create config", err)
	}
	return c, nil
}

func configNotFound(id string) error {
	return problem.Newf(problem.NotFound, "Config %s not found", shownID(id))
}

// GetConfig returns the current version of a config.
func (s *Service) GetConfig(ctx context.Context, tenant, configID string) (*store.Config, error) {
	c, err := s.store.GetConfig(ctx, tenant, configID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, configNotFound(configID)
	}
	if err != nil {
		return nil, storeErr("get config", err)
	}
	return c, nil
}

// UpdateConfig records a new version of a config; its type never changes.
// Fields left empty keep their current value, except Settings, which is
// required: a version is a complete, self-contained setting. Without
// ExpectedVersion a version another writer took meanwhile is read again
// and built on, until ctx ends: the caller asked for no check, and each
// lost race means another version was recorded.
func (s *Service) UpdateConfig(ctx context.Context, tenant, configID string, in ConfigInput) (*store.Config, error) {
	for {
		c, err := s.updateConfigOnce(ctx, tenant, configID, in)
		if !errors.Is(err, store.ErrVersionConflict) {
			return c, err
		}
		if in.ExpectedVersion != 0 {
			return nil, problem.Wrap(problem.Conflict, fmt.Sprintf("Config %s was changed concurrently; version %d already exists", configID, c.Version), err)
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, storeErr("update config", fmt.Errorf("config %s kept changing: %w", configID, cerr))
		}
	}
}

// updateConfigOnce makes one attempt at the next version; a version taken
// meanwhile is store.ErrVersionConflict with the version it tried.
func (s *Service) updateConfigOnce(ctx context.Context, tenant, configID string, in ConfigInput) (*store.Config, error) {
	cur, err := s.GetConfig(ctx, tenant, configID)
	if err != nil {
		return nil, err
	}
	inheritConfig(&in, cur, configID)
	if err := s.checkConfig(ctx, tenant, &in, false); err != nil {
		return nil, err
	}
	if cur.Status == store.ConfigArchived {
		return nil, problem.Newf(problem.Conflict, "Config %s is archived", configID)
	}
	if in.ExpectedVersion != 0 && in.ExpectedVersion != cur.Version {
		return nil, problem.Newf(problem.Conflict, "Config %s is at version %d, not %d", configID, cur.Version, in.ExpectedVersion)
	}
	now := s.nowMS()
	if in.EffectiveAt == 0 {
		in.EffectiveAt = now
	}
	next := &store.Config{TenantID: tenant, ID: configID, Version: cur.Version + 1, Type: cur.Type, Name: in.Name, ScopeType: in.ScopeType, ScopeID: in.ScopeID,
		Settings: docJSON(in.Settings), Status: store.ConfigActive, EffectiveAt: in.EffectiveAt, CreatedAt: now}
	err = s.store.PutConfigVersion(ctx, next)
	switch {
	case errors.Is(err, store.ErrVersionConflict):
		return next, err
	case errors.Is(err, store.ErrArchived):
		return nil, problem.Newf(problem.Conflict, "Config %s is archived", configID)
	case errors.Is(err, store.ErrNotFound):
		return nil, configNotFound(configID)
	case err != nil:
		return nil, storeErr("update config", err)
	}
	return next, nil
}

// ArchiveConfig soft-deletes a config; every version stays readable.
func (s *Service) ArchiveConfig(ctx context.Context, tenant, configID string) (*store.Config, error) {
	c, err := s.store.ArchiveConfig(ctx, tenant, configID, s.nowMS())
	if errors.Is(err, store.ErrNotFound) {
		return nil, configNotFound(configID)
	}
	if err != nil {
		return nil, storeErr("archive config", err)
	}
	return c, nil
}

// ConfigVersions returns the version history, oldest first.
func (s *Service) ConfigVersions(ctx context.Context, tenant, configID string) ([]store.Config, error) {
	vs, err := s.store.ListConfigVersions(ctx, tenant, configID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, configNotFound(configID)
	}
	if err != nil {
		return nil, storeErr("config versions", err)
	}
	return vs, nil
}

// ConfigPage is one page of configs.
type ConfigPage struct {
	Items   []store.Config
	Cursor  string
	HasMore bool
}

// ListConfigs lists the current versions of the tenant's configs.
func (s *Service) ListConfigs(ctx context.Context, tenant, typ, status, cursor string, limit int) (*ConfigPage, error) {
	limit, err := PageLimit(limit)
	if err != nil {
		return nil, err
	}
	after, err := DecodeCursor(ListingConfigs, cursor)
	if err != nil {
		return nil, err
	}
	if status != "" && status != store.ConfigActive && status != store.ConfigArchived {
		return nil, problem.Validation([]problem.FieldError{{Field: "status", Code: problem.CodeEnum, Message: fmt.Sprintf("status must be %s or %s", store.ConfigActive, store.ConfigArchived)}})
	}
	rows, err := s.store.ListConfigs(ctx, store.ConfigFilter{TenantID: tenant, Type: typ, Status: status, AfterID: after, Limit: limit + 1})
	if err != nil {
		return nil, storeErr("list configs", err)
	}
	page := &ConfigPage{Items: rows}
	if len(rows) > limit {
		page.Items, page.HasMore = rows[:limit], true
		page.Cursor = EncodeCursor(ListingConfigs, rows[limit-1].ID)
	}
	return page, nil
}
