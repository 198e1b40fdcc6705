package webhook

import (
	"context"
	"errors"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// RegisterConfigType makes p validate webhook configs (POST /v1/configs
// with type webhook, and every new version) and gives the service the
// platform it writes rotated config versions through.
func (s *Service) RegisterConfigType(p *platform.Service) {
	if s.platform == nil {
		s.platform = p
	}
	p.RegisterConfigCheck(ConfigType, s.checkConfig)
}

// checkConfig validates a webhook config: the settings table, the scope
// (scope_type campaign, account or asset; scope_id is the contract's
// applies_to) and that secret_ref names a live secret of the tenant. It
// stores the settings with every default applied.
func (s *Service) checkConfig(ctx context.Context, tenant string, in *platform.ConfigInput, _ bool) []problem.FieldError {
	settings, errs := ParseSettings(in.Settings)
	for i := range errs {
		errs[i].Field = "settings." + errs[i].Field
	}
	if msg := s.policy.checkURLHost(settings.URL); msg != "" {
		errs = append(errs, problem.FieldError{Field: "settings.url", Code: problem.CodeFormat, Message: msg})
	}
	if extra := newSettingsProblems(in.Settings); len(extra) > 0 {
		errs = append(errs, extra...)
		if ref, _ := in.Settings["secret_ref"].(string); len(ref) > maxSecretRefLength {
			settings.SecretRef = "" // not looked up: the refusal says enough
		}
	}
	switch in.ScopeType {
	case "":
		in.ScopeType = ScopeAccount
		fallthrough
	case ScopeAccount:
		if in.ScopeID == "" {
			in.ScopeID = tenant
		} else if in.ScopeID != tenant {
			errs = append(errs, problem.FieldError{Field: "scope_id", Code: problem.CodeFormat,
				Message: "an account-scoped webhook applies to its own account: scope_id (applies_to) must be the tenant id " + tenant + " or omitted"})
		}
	case ScopeCampaign, ScopeAsset:
		if in.ScopeID == "" {
			errs = append(errs, problem.FieldError{Field: "scope_id", Code: problem.CodeRequired,
				Message: "scope_id (applies_to) is required: the " + in.ScopeType + " id the webhook applies to"})
		}
	default:
		errs = append(errs, problem.FieldError{Field: "scope_type", Code: problem.CodeEnum,
			Message: "scope_type (the webhook's scope) must be campaign, account or asset"})
	}
	if settings.SecretRef != "" {
		_, err := s.secrets.get(ctx, tenant, settings.SecretRef)
		switch {
		case errors.Is(err, errSecretNotFound):
			errs = append(errs, problem.FieldError{Field: "settings.secret_ref", Code: problem.CodeFormat,
				Message: "secret_ref " + settings.SecretRef + " names no secret of this tenant; create one with POST /v1/admin/webhooks/secrets"})
		case errors.Is(err, errSecretExpired):
			errs = append(errs, problem.FieldError{Field: "settings.secret_ref", Code: problem.CodeFormat,
				Message: "secret " + settings.SecretRef + " has expired (it was rotated out); reference the current secret"})
		case errors.Is(err, store.ErrSecretKeyMismatch):
			// No process with this server's key can sign with it.
			errs = append(errs, problem.FieldError{Field: "settings.secret_ref", Code: problem.CodeFormat,
				Message: "secret " + settings.SecretRef + " was encrypted with another key than this server's FACTLINE_SECRET_KEY; create a new secret"})
		case err != nil:
			s.log.Warn("webhook: cannot check secret_ref", "tenant", tenant, "secret_ref", settings.SecretRef, "err", err)
		}
	}
	if len(errs) == 0 {
		in.Settings = settings.toMap()
	}
	return errs
}
