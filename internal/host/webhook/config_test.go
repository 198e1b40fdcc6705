package webhook

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// Acceptance: config validation at creation for every bound of the
// settings table, through POST /v1/configs' platform path.
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	base := func() map[string]any {
		return map[string]any{"url": "https://hooks.example.com/in", "secret_ref": e.ref, "triggers": []any{"outcome.deal_won"}}
	}
	with := func(k string, v any) map[string]any {
		m := base()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	retry := func(k string, v any) map[string]any { return with("retry", map[string]any{k: v}) }
	payload := func(k string, v any) map[string]any { return with("payload", map[string]any{k: v}) }
	num := func(s string) json.Number { return json.Number(s) }

	cases := []struct {
		name     string
		settings map[string]any
		scope    [2]string // scope_type, scope_id
		field    string    // "" means valid
		code     string
	}{
		{"minimal valid", base(), [2]string{}, "", ""},
		{"url required", with("url", nil), [2]string{}, "settings.url", problem.CodeRequired},
		{"url http", with("url", "http://hooks.example.com/in"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url https only", with("url", "https://"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url host without a dot", with("url", "https://localhost/in"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url with credentials", with("url", "https://u:p@hooks.example.com/"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url not a string", with("url", num("1")), [2]string{}, "settings.url", problem.CodeType},
		{"url to a private address", with("url", "https://10.1.2.3/in"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url to the metadata address", with("url", "https://169.254.169.254/latest"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url to a mapped loopback", with("url", "https://[::ffff:127.0.0.2]/in"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url to a documentation range", with("url", "https://192.0.2.10:8443/in"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url to a public address", with("url", "https://8.8.8.8/in"), [2]string{}, "", ""},
		{"url to an allowed address", with("url", "https://127.0.0.1:8443/in"), [2]string{}, "", ""},
		{"url of 2048 bytes", with("url", "https://hooks.example.com/"+strings.Repeat("a", 2048-26)), [2]string{}, "", ""},
		{"url over 2048 bytes", with("url", "https://hooks.example.com/"+strings.Repeat("a", 2048-25)), [2]string{}, "settings.url", problem.CodeFormat},
		{"secret_ref required", with("secret_ref", nil), [2]string{}, "settings.secret_ref", problem.CodeRequired},
		{"inline secret as ref", with("secret_ref", "whsec_abc"), [2]string{}, "settings.secret_ref", problem.CodeFormat},
		{"secret_ref upper case", with("secret_ref", "webhook_secret_ABC"), [2]string{}, "settings.secret_ref", problem.CodeFormat},
		{"secret_ref empty suffix", with("secret_ref", "webhook_secret_"), [2]string{}, "settings.secret_ref", problem.CodeFormat},
		{"secret_ref too long", with("secret_ref", "webhook_secret_"+strings.Repeat("a", 65)), [2]string{}, "settings.secret_ref", problem.CodeFormat},
		{"url with a space", with("url", "https://hooks.example.com/ x"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url with a fragment", with("url", "https://hooks.example.com/x#frag"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url with an octal address", with("url", "https://0177.0.0.2/x"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url with a hex address", with("url", "https://0x7f.0.0.1/x"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url with an address out of range", with("url", "https://999.1.1.1/x"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url with digits in its host name", with("url", "https://hooks1.example.com/x"), [2]string{}, "", ""},
		{"url with a full-width octal address", with("url", "https://\uff10\uff11\uff17\uff17.\uff10.\uff10.\uff12/x"), [2]string{}, "settings.url", problem.CodeFormat},
		{"url with one full-width digit", with("url", "https://0177.0.0.\uff12/x"), [2]string{}, "settings.url", problem.CodeFormat},
		{"secret_ref unknown", with("secret_ref", "webhook_secret_nosuch1"), [2]string{}, "settings.secret_ref", problem.CodeFormat},
		{"inline secret field", with("secret", "whsec_abc"), [2]string{}, "settings.secret", problem.CodeUnknownField},
		{"unknown setting", with("colour", "red"), [2]string{}, "settings.colour", problem.CodeUnknownField},
		{"triggers required", with("triggers", nil), [2]string{}, "settings.triggers", problem.CodeRequired},
		{"triggers empty", with("triggers", []any{}), [2]string{}, "settings.triggers", problem.CodeRequired},
		{"trigger without subtype", with("triggers", []any{"outcome"}), [2]string{}, "settings.triggers[0]", problem.CodeFormat},
		{"trigger with digits", with("triggers", []any{"outcome.won2"}), [2]string{}, "settings.triggers[0]", problem.CodeFormat},
		{"trigger wildcard", with("triggers", []any{"outcome.*"}), [2]string{}, "settings.triggers[0]", problem.CodeFormat},
		{"trigger upper case", with("triggers", []any{"a.b", "Outcome.Won"}), [2]string{}, "settings.triggers[1]", problem.CodeFormat},
		{"retry not an object", with("retry", "yes"), [2]string{}, "settings.retry", problem.CodeType},
		{"retry.enabled not bool", retry("enabled", "no"), [2]string{}, "settings.retry.enabled", problem.CodeType},
		{"max_attempts 1", retry("max_attempts", num("1")), [2]string{}, "", ""},
		{"max_attempts 20", retry("max_attempts", num("20")), [2]string{}, "", ""},
		{"max_attempts 0", retry("max_attempts", num("0")), [2]string{}, "settings.retry.max_attempts", problem.CodeRange},
		{"max_attempts 21", retry("max_attempts", num("21")), [2]string{}, "settings.retry.max_attempts", problem.CodeRange},
		{"max_attempts 2.5", retry("max_attempts", num("2.5")), [2]string{}, "settings.retry.max_attempts", problem.CodeType},
		{"backoff_base 1", retry("backoff_base_seconds", num("1")), [2]string{}, "", ""},
		{"backoff_base 3600", retry("backoff_base_seconds", num("3600")), [2]string{}, "", ""},
		{"backoff_base 0", retry("backoff_base_seconds", num("0")), [2]string{}, "settings.retry.backoff_base_seconds", problem.CodeRange},
		{"backoff_base 3601", retry("backoff_base_seconds", num("3601")), [2]string{}, "settings.retry.backoff_base_seconds", problem.CodeRange},
		{"multiplier 1.5", retry("backoff_multiplier", num("1.5")), [2]string{}, "", ""},
		{"multiplier 0.5", retry("backoff_multiplier", num("0.5")), [2]string{}, "settings.retry.backoff_multiplier", problem.CodeRange},
		{"multiplier 11", retry("backoff_multiplier", num("11")), [2]string{}, "settings.retry.backoff_multiplier", problem.CodeRange},
		{"multiplier string", retry("backoff_multiplier", "2"), [2]string{}, "settings.retry.backoff_multiplier", problem.CodeType},
		{"backoff_max below base", with("retry", map[string]any{"backoff_base_seconds": num("120"), "backoff_max_seconds": num("60")}), [2]string{}, "settings.retry.backoff_max_seconds", problem.CodeRange},
		{"backoff_max 86401", retry("backoff_max_seconds", num("86401")), [2]string{}, "settings.retry.backoff_max_seconds", problem.CodeRange},
		{"timeout 5", retry("timeout_seconds", num("5")), [2]string{}, "", ""},
		{"timeout 300", retry("timeout_seconds", num("300")), [2]string{}, "", ""},
		{"timeout 4", retry("timeout_seconds", num("4")), [2]string{}, "settings.retry.timeout_seconds", problem.CodeRange},
		{"timeout 301", retry("timeout_seconds", num("301")), [2]string{}, "settings.retry.timeout_seconds", problem.CodeRange},
		{"unknown retry setting", retry("jitter", num("1")), [2]string{}, "settings.retry.jitter", problem.CodeUnknownField},
		{"format json", payload("format", "json"), [2]string{}, "", ""},
		{"format xml is future", payload("format", "xml"), [2]string{}, "settings.payload.format", problem.CodeEnum},
		{"format form is future", payload("format", "form"), [2]string{}, "settings.payload.format", problem.CodeEnum},
		{"format yaml", payload("format", "yaml"), [2]string{}, "settings.payload.format", problem.CodeEnum},
		{"include_fields", payload("include_fields", []any{"fact_id", "fact_type", "fact_subtype", "timestamp", "data.amount"}), [2]string{}, "", ""},
		{"include_fields unknown", payload("include_fields", []any{"fact_id", "secret"}), [2]string{}, "settings.payload.include_fields[1]", problem.CodeEnum},
		{"include_fields empty", payload("include_fields", []any{}), [2]string{}, "settings.payload.include_fields", problem.CodeRequired},
		{"field_mapping", payload("field_mapping", map[string]any{"fact_id": "event_id"}), [2]string{}, "", ""},
		{"field_mapping bad name", payload("field_mapping", map[string]any{"fact_id": "event id"}), [2]string{}, "settings.payload.field_mapping.fact_id", problem.CodeFormat},
		{"field_mapping collision", payload("field_mapping", map[string]any{"fact_id": "type"}), [2]string{}, "settings.payload.field_mapping", problem.CodeFormat},
		{"field_mapping of an unsent field", with("payload", map[string]any{"include_fields": []any{"fact_id"}, "field_mapping": map[string]any{"fact_type": "kind"}}), [2]string{}, "settings.payload.field_mapping.fact_type", problem.CodeEnum},
		{"include_full_fact not bool", payload("include_full_fact", "yes"), [2]string{}, "settings.payload.include_full_fact", problem.CodeType},
		{"headers", with("headers", map[string]any{"X-Team": "a"}), [2]string{}, "", ""},
		{"headers override signature", with("headers", map[string]any{"X-Svc-Signature": "x"}), [2]string{}, "settings.headers.X-Svc-Signature", problem.CodeFormat},
		{"headers override content type", with("headers", map[string]any{"content-type": "text/plain"}), [2]string{}, "settings.headers.content-type", problem.CodeFormat},
		{"header value with newline", with("headers", map[string]any{"X-A": "a\r\nB: c"}), [2]string{}, "settings.headers.X-A", problem.CodeFormat},
		{"header bad name", with("headers", map[string]any{"X A": "a"}), [2]string{}, "settings.headers.X A", problem.CodeFormat},
		{"header value with a control character", with("headers", map[string]any{"X-Ctl": "a\u0001b"}), [2]string{}, "settings.headers.X-Ctl", problem.CodeFormat},
		{"header value with DEL", with("headers", map[string]any{"X-Ctl": "a\u007fb"}), [2]string{}, "settings.headers.X-Ctl", problem.CodeFormat},
		{"header value with a tab", with("headers", map[string]any{"X-Tab": "a\tb"}), [2]string{}, "", ""},
		{"header holding a secret", with("headers", map[string]any{"Authorization": "whsec_V2A8aGVsbG8="}), [2]string{}, "settings.headers.Authorization", problem.CodeFormat},
		{"url holding a secret", with("url", "https://hooks.example.com/in?token=whsec_V2A8aGVsbG8="), [2]string{}, "settings.url", problem.CodeFormat},
		{"standard_webhooks", with("standard_webhooks", true), [2]string{}, "", ""},
		{"scope campaign", base(), [2]string{"campaign", "camp-1"}, "", ""},
		{"scope asset", base(), [2]string{"asset", "asset-1"}, "", ""},
		{"scope campaign without applies_to", base(), [2]string{"campaign", ""}, "scope_id", problem.CodeRequired},
		{"scope account of another tenant", base(), [2]string{"account", "tenant-b"}, "scope_id", problem.CodeFormat},
		{"scope tenant", base(), [2]string{"tenant", ""}, "scope_type", problem.CodeEnum},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.plat.CreateConfig(t.Context(), tenantA, platform.ConfigInput{Type: ConfigType, Settings: maps.Clone(c.settings),
				ScopeType: c.scope[0], ScopeID: c.scope[1]})
			if c.field == "" {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Kind != problem.ValidationFailed {
				t.Fatalf("got %v, want a validation-failed problem", err)
			}
			for _, fe := range pe.Errors {
				if fe.Field == c.field && fe.Code == c.code {
					return
				}
			}
			t.Fatalf("errors %+v do not name %s (%s)", pe.Errors, c.field, c.code)
		})
	}
}

// Settings are stored with every default applied; an account scope
// defaults to the tenant; every version is validated.
func TestConfigDefaultsAndVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	c := e.createConfig(platform.ConfigInput{Settings: map[string]any{"url": "https://hooks.example.com/in", "secret_ref": e.ref,
		"triggers": []any{"outcome.deal_won", "outcome.deal_won"}}})
	if c.ScopeType != ScopeAccount || c.ScopeID != tenantA {
		t.Errorf("scope %s/%s, want account/%s", c.ScopeType, c.ScopeID, tenantA)
	}
	var got map[string]any
	_ = json.Unmarshal(c.Settings, &got)
	want := `{"payload":{"format":"json","include_full_fact":false},"retry":{"backoff_base_seconds":60,"backoff_max_seconds":3600,` +
		`"backoff_multiplier":2,"enabled":true,"max_attempts":5,"timeout_seconds":30},"secret_ref":"` + e.ref + `",` +
		`"standard_webhooks":false,"triggers":["outcome.deal_won"],"url":"https://hooks.example.com/in"}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("stored settings\n got %s\nwant %s", b, want)
	}
	_, err := e.plat.UpdateConfig(t.Context(), tenantA, c.ID, platform.ConfigInput{Settings: map[string]any{"url": "http://x.example.com"}})
	var pe *problem.Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Error(), "validation") {
		t.Fatalf("invalid new version: %v", err)
	}
	v2, err := e.plat.UpdateConfig(t.Context(), tenantA, c.ID, platform.ConfigInput{Settings: e.settings(nil)})
	if err != nil || v2.Version != 2 || v2.ScopeType != ScopeAccount {
		t.Fatalf("version 2: %+v, %v", v2, err)
	}
}

// TestStoredConfigsKeepFiringUnderNewChecks: the checks a new config
// passes beyond ParseSettings do not apply to versions already stored,
// which keep firing (the matcher compiles them with ParseSettings).
func TestStoredConfigsKeepFiringUnderNewChecks(t *testing.T) {
	t.Parallel()
	settings := `{"url":"https://hooks.example.com/x#frag","secret_ref":"webhook_secret_` + strings.Repeat("a", 100) + `","triggers":["outcome.deal_won"]}`
	if _, err := compile(&store.Config{ID: "cfg_1", TenantID: "t1", Version: 1, Type: "webhook", Settings: json.RawMessage(settings)}); err != nil {
		t.Fatalf("a stored config refused: %v", err)
	}
	if errs := newSettingsProblems(map[string]any{"url": "https://hooks.example.com/x#frag", "secret_ref": "webhook_secret_" + strings.Repeat("a", 100)}); len(errs) != 2 {
		t.Fatalf("a new config: %v, want the fragment and the secret_ref refused", errs)
	}
}
