package webhook

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"

	"github.com/factline/factline/internal/host/problem"
)

// Settings are a webhook config's settings after validation, with every
// default applied. They are stored in this normalised form, so a config
// version shows exactly what it does.
type Settings struct {
	URL       string          `json:"url"`
	SecretRef string          `json:"secret_ref"`
	Triggers  []string        `json:"triggers"`
	Retry     RetrySettings   `json:"retry"`
	Payload   PayloadSettings `json:"payload"`
	// Headers are custom HTTP headers sent with every delivery.
	Headers map[string]string `json:"headers,omitempty"`
	// StandardWebhooks also sends webhook-id, webhook-timestamp and
	// webhook-signature (https://www.standardwebhooks.com), so receivers
	// using those libraries verify without custom code.
	StandardWebhooks bool `json:"standard_webhooks"`
}

// RetrySettings are the settings' retry object.
type RetrySettings struct {
	Enabled            bool    `json:"enabled"`
	MaxAttempts        int     `json:"max_attempts"`
	BackoffBaseSeconds int     `json:"backoff_base_seconds"`
	BackoffMultiplier  float64 `json:"backoff_multiplier"`
	BackoffMaxSeconds  int     `json:"backoff_max_seconds"`
	TimeoutSeconds     int     `json:"timeout_seconds"`
}

// PayloadSettings are the settings' payload object.
type PayloadSettings struct {
	Format          string            `json:"format"`
	IncludeFields   []string          `json:"include_fields,omitempty"`
	FieldMapping    map[string]string `json:"field_mapping,omitempty"`
	IncludeFullFact bool              `json:"include_full_fact"`
}

// Defaults and bounds of the settings table.
const (
	DefaultMaxAttempts        = 5
	DefaultBackoffBaseSeconds = 60
	DefaultBackoffMultiplier  = 2.0
	DefaultBackoffMaxSeconds  = 3600
	DefaultTimeoutSeconds     = 30

	MinMaxAttempts, MaxMaxAttempts       = 1, 20
	MinBackoffBase, MaxBackoffBase       = 1, 3600
	MinTimeoutSeconds, MaxTimeoutSeconds = 5, 300
	// The contract leaves the multiplier and the cap unbounded; these
	// bounds keep schedules meaningful (see README.md).
	MinBackoffMultiplier, MaxBackoffMultiplier = 1.0, 10.0
	MaxBackoffMaxSeconds                       = 86400

	maxTriggers = 100
	maxHeaders  = 32
)

var (
	secretRefRe = regexp.MustCompile(`^webhook_secret_[a-z0-9]+$`)
	triggerRe   = regexp.MustCompile(`^[a-z_]+\.[a-z_]+$`)
	headerRe    = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]{1,128}$")
	mappedKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// reservedHeaders are set by the service on every delivery; a config may
// not set them.
var reservedHeaders = map[string]bool{
	"content-type": true, "content-length": true, "user-agent": true, "host": true, "connection": true,
	"transfer-encoding": true, "te": true, "trailer": true, "upgrade": true, "keep-alive": true, "expect": true,
	"webhook-id": true, "webhook-timestamp": true, "webhook-signature": true,
}

// factFields maps the names include_fields and field_mapping use to the key
// the field has in the delivered body's fact object. data.<key> names one
// key of the fact's data.
var factFields = map[string]string{
	"fact_id": "id", "fact_type": "type", "fact_subtype": "subtype", "timestamp": "timestamp", "data": "data",
	"entity_id": "entity_id", "entity_type": "entity_type", "source_id": "source_id", "trace_id": "trace_id",
	"created_at": "created_at",
}

// validField reports whether name is a fact field name or data.<key>.
func validField(name string) bool {
	if _, ok := factFields[name]; ok {
		return true
	}
	k, ok := strings.CutPrefix(name, "data.")
	return ok && k != ""
}

// fieldList is a sorted list of the names, for messages.
func fieldList() string {
	names := make([]string, 0, len(factFields))
	for n := range factFields {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ") + " or data.<key>"
}

// settingsErrors collects field errors with paths relative to settings.
type settingsErrors []problem.FieldError

func (e *settingsErrors) add(field, code, format string, args ...any) {
	*e = append(*e, problem.FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)})
}

// ParseSettings validates a settings object as the contract's settings
// table says and returns it with defaults applied. Field names in the
// errors are relative to settings ("url", "retry.max_attempts").
func ParseSettings(m map[string]any) (Settings, []problem.FieldError) {
	var errs settingsErrors
	s := Settings{
		Retry: RetrySettings{Enabled: true, MaxAttempts: DefaultMaxAttempts, BackoffBaseSeconds: DefaultBackoffBaseSeconds,
			BackoffMultiplier: DefaultBackoffMultiplier, BackoffMaxSeconds: DefaultBackoffMaxSeconds, TimeoutSeconds: DefaultTimeoutSeconds},
		Payload: PayloadSettings{Format: "json"},
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "url", "secret_ref", "triggers", "retry", "payload", "headers", "standard_webhooks":
		case "secret", "secret_value", "signing_secret", "key":
			errs.add(k, problem.CodeUnknownField, "secrets are never inlined in settings: create one with POST /v1/admin/webhooks/secrets and reference it with secret_ref")
		default:
			errs.add(k, problem.CodeUnknownField, "unknown setting %s", k)
		}
	}

	switch v, ok := m["url"]; {
	case !ok || v == nil:
		errs.add("url", problem.CodeRequired, "url is required")
	default:
		u, isStr := v.(string)
		if !isStr {
			errs.add("url", problem.CodeType, "url must be a string")
			break
		}
		s.URL = u
		if msg := checkURL(u); msg != "" {
			errs.add("url", problem.CodeFormat, "%s", msg)
		} else if strings.Contains(u, secretPrefix) {
			errs.add("url", problem.CodeFormat, inlineSecret)
		}
	}

	switch v, ok := m["secret_ref"]; {
	case !ok || v == nil || v == "":
		errs.add("secret_ref", problem.CodeRequired, "secret_ref is required: create a secret with POST /v1/admin/webhooks/secrets and reference it here")
	default:
		ref, isStr := v.(string)
		switch {
		case !isStr:
			errs.add("secret_ref", problem.CodeType, "secret_ref must be a string")
		case !secretRefRe.MatchString(ref):
			errs.add("secret_ref", problem.CodeFormat, "secret_ref must be webhook_secret_ followed by lowercase letters and digits; it references a secret and never holds one")
		default:
			s.SecretRef = ref
		}
	}

	switch v, ok := m["triggers"]; {
	case !ok || v == nil:
		errs.add("triggers", problem.CodeRequired, "triggers is required: a list of <type>.<subtype>")
	default:
		list, isList := v.([]any)
		switch {
		case !isList:
			errs.add("triggers", problem.CodeType, "triggers must be an array of strings")
		case len(list) == 0:
			errs.add("triggers", problem.CodeRequired, "triggers must name at least one <type>.<subtype>")
		case len(list) > maxTriggers:
			errs.add("triggers", problem.CodeRange, "triggers may list at most %d entries", maxTriggers)
		default:
			seen := map[string]bool{}
			for i, x := range list {
				f := fmt.Sprintf("triggers[%d]", i)
				t, isStr := x.(string)
				switch {
				case !isStr:
					errs.add(f, problem.CodeType, "a trigger must be a string")
				case !triggerRe.MatchString(t):
					errs.add(f, problem.CodeFormat, "trigger %q must be <type>.<subtype> made of lowercase letters and underscores", t)
				case !seen[t]:
					seen[t] = true
					s.Triggers = append(s.Triggers, t)
				}
			}
		}
	}

	if v, ok := m["retry"]; ok && v != nil {
		obj, isObj := v.(map[string]any)
		if !isObj {
			errs.add("retry", problem.CodeType, "retry must be an object")
		} else {
			parseRetry(obj, &s.Retry, &errs)
		}
	}
	if v, ok := m["payload"]; ok && v != nil {
		obj, isObj := v.(map[string]any)
		if !isObj {
			errs.add("payload", problem.CodeType, "payload must be an object")
		} else {
			parsePayload(obj, &s.Payload, &errs)
		}
	}
	if v, ok := m["headers"]; ok && v != nil {
		obj, isObj := v.(map[string]any)
		if !isObj {
			errs.add("headers", problem.CodeType, "headers must be an object of header names to string values")
		} else {
			s.Headers = parseHeaders(obj, &errs)
		}
	}
	if v, ok := m["standard_webhooks"]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			errs.add("standard_webhooks", problem.CodeType, "standard_webhooks must be a boolean")
		}
		s.StandardWebhooks = b
	}
	return s, errs
}

// maxURLLength bounds a webhook URL, as common HTTP servers and proxies
// bound a request line.
const maxURLLength = 2048

// checkURL returns what is wrong with a webhook URL, or "".
func checkURL(raw string) string {
	if len(raw) > maxURLLength {
		return fmt.Sprintf("url must be at most %d bytes", maxURLLength)
	}
	rest, ok := strings.CutPrefix(raw, "https://")
	if !ok || rest == "" {
		return "url must start with https:// followed by a host"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "url is not a valid URL"
	}
	if u.User != nil {
		return "url must not carry credentials; send them in headers"
	}
	host := u.Hostname()
	if !strings.Contains(strings.Trim(host, "."), ".") {
		return "url's host name must contain a dot (a public host name, not " + host + ")"
	}
	if port := u.Port(); port != "" {
		var p int
		if _, err := fmt.Sscan(port, &p); err != nil || p < 1 || p > 65535 {
			return "url has an invalid port"
		}
	}
	return ""
}

// maxSecretRefLength bounds a new config's secret_ref (the prefix and 64
// characters; the server makes them of 26).
const maxSecretRefLength = len("webhook_secret_") + 64

// newSettingsProblems are the checks of a config being created or
// updated beyond ParseSettings, which also reads stored configs: a
// config stored before a check was added keeps firing. A URL with a raw
// space, a fragment (never sent to a receiver) or a host of digits and
// dots that is not a dotted-decimal IPv4 address (0177.0.0.2 and
// 0x7f.0.0.1 are read differently by different resolvers; full-width
// digits are mapped to ASCII, as the HTTP client maps them) could never
// be delivered to as meant; a secret_ref longer than any the server
// makes names no secret.
func newSettingsProblems(m map[string]any) []problem.FieldError {
	var errs []problem.FieldError
	if raw, ok := m["url"].(string); ok && checkURL(raw) == "" {
		msg := ""
		switch u, _ := url.Parse(raw); {
		case strings.ContainsAny(raw, " \t"):
			msg = "url must not contain spaces (percent-encode them as %20)"
		case strings.Contains(raw, "#"):
			msg = "url must not have a fragment (#...): it is never sent to the receiver"
		default:
			host := u.Hostname()
			if a, err := idna.Lookup.ToASCII(host); err == nil {
				host = a
			}
			if _, err := netip.ParseAddr(host); err != nil && looksNumeric(host) {
				msg = "url's host " + u.Hostname() + " is neither a host name nor an IPv4 address in dotted decimal (no leading zeros, octal or hex parts)"
			}
		}
		if msg != "" {
			errs = append(errs, problem.FieldError{Field: "settings.url", Code: problem.CodeFormat, Message: msg})
		}
	}
	if ref, ok := m["secret_ref"].(string); ok && len(ref) > maxSecretRefLength {
		errs = append(errs, problem.FieldError{Field: "settings.secret_ref", Code: problem.CodeFormat,
			Message: fmt.Sprintf("secret_ref must be at most %d characters; it references a secret and never holds one", maxSecretRefLength)})
	}
	return errs
}

// looksNumeric reports a host of digits and dots only (or hex parts such
// as 0x7f): an IPv4 address, or a form of one that resolvers read in
// other ways (0177.0.0.1 is octal to some, a name to others).
func looksNumeric(host string) bool {
	for _, label := range strings.Split(host, ".") {
		l := strings.ToLower(label)
		if l == "" {
			continue
		}
		if h, ok := strings.CutPrefix(l, "0x"); ok {
			l = h
			if strings.Trim(l, "0123456789abcdef") != "" {
				return false
			}
			continue
		}
		if strings.Trim(l, "0123456789") != "" {
			return false
		}
	}
	return true
}

func parseRetry(m map[string]any, r *RetrySettings, errs *settingsErrors) {
	for _, k := range sortedKeys(m) {
		switch k {
		case "enabled", "max_attempts", "backoff_base_seconds", "backoff_multiplier", "backoff_max_seconds", "timeout_seconds":
		default:
			errs.add("retry."+k, problem.CodeUnknownField, "unknown retry setting %s", k)
		}
	}
	if v, ok := m["enabled"]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			errs.add("retry.enabled", problem.CodeType, "retry.enabled must be a boolean")
		}
		r.Enabled = b
	}
	intSetting(m, "max_attempts", MinMaxAttempts, MaxMaxAttempts, &r.MaxAttempts, errs)
	intSetting(m, "backoff_base_seconds", MinBackoffBase, MaxBackoffBase, &r.BackoffBaseSeconds, errs)
	intSetting(m, "backoff_max_seconds", 1, MaxBackoffMaxSeconds, &r.BackoffMaxSeconds, errs)
	intSetting(m, "timeout_seconds", MinTimeoutSeconds, MaxTimeoutSeconds, &r.TimeoutSeconds, errs)
	if v, ok := m["backoff_multiplier"]; ok && v != nil {
		x, isNum := number(v)
		switch {
		case !isNum:
			errs.add("retry.backoff_multiplier", problem.CodeType, "retry.backoff_multiplier must be a number")
		case x < MinBackoffMultiplier || x > MaxBackoffMultiplier:
			errs.add("retry.backoff_multiplier", problem.CodeRange, "retry.backoff_multiplier must be between %g and %g", MinBackoffMultiplier, MaxBackoffMultiplier)
		default:
			r.BackoffMultiplier = x
		}
	}
	if r.BackoffMaxSeconds < r.BackoffBaseSeconds {
		errs.add("retry.backoff_max_seconds", problem.CodeRange, "retry.backoff_max_seconds (%d) must not be below retry.backoff_base_seconds (%d)",
			r.BackoffMaxSeconds, r.BackoffBaseSeconds)
	}
}

// intSetting reads an optional integer retry setting within [lo, hi].
func intSetting(m map[string]any, key string, lo, hi int, dst *int, errs *settingsErrors) {
	v, ok := m[key]
	if !ok || v == nil {
		return
	}
	field := "retry." + key
	x, isNum := number(v)
	switch {
	case !isNum || x != math.Trunc(x) || math.Abs(x) > 1e9:
		errs.add(field, problem.CodeType, "%s must be an integer", field)
	case int(x) < lo || int(x) > hi:
		errs.add(field, problem.CodeRange, "%s must be between %d and %d", field, lo, hi)
	default:
		*dst = int(x)
	}
}

// number reads a JSON number (json.Number from the gateway, float64 or an
// integer from Go callers).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		x, err := n.Float64()
		return x, err == nil && !math.IsInf(x, 0) && !math.IsNaN(x)
	case float64:
		return n, !math.IsInf(n, 0) && !math.IsNaN(n)
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

func parsePayload(m map[string]any, p *PayloadSettings, errs *settingsErrors) {
	for _, k := range sortedKeys(m) {
		switch k {
		case "format", "include_fields", "field_mapping", "include_full_fact":
		default:
			errs.add("payload."+k, problem.CodeUnknownField, "unknown payload setting %s", k)
		}
	}
	if v, ok := m["format"]; ok && v != nil {
		f, isStr := v.(string)
		switch {
		case !isStr:
			errs.add("payload.format", problem.CodeType, "payload.format must be a string")
		case f == "xml" || f == "form":
			errs.add("payload.format", problem.CodeEnum, "payload.format %s is not supported yet; use json", f)
		case f != "json":
			errs.add("payload.format", problem.CodeEnum, "payload.format must be json")
		}
	}
	included := map[string]bool{}
	if v, ok := m["include_fields"]; ok && v != nil {
		list, isList := v.([]any)
		switch {
		case !isList:
			errs.add("payload.include_fields", problem.CodeType, "payload.include_fields must be an array of field names")
		case len(list) == 0:
			errs.add("payload.include_fields", problem.CodeRequired, "payload.include_fields must name at least one field; omit it to send the contract's fact fields (id, type, subtype, timestamp, data)")
		default:
			for i, x := range list {
				f := fmt.Sprintf("payload.include_fields[%d]", i)
				name, isStr := x.(string)
				switch {
				case !isStr:
					errs.add(f, problem.CodeType, "a field name must be a string")
				case !validField(name):
					errs.add(f, problem.CodeEnum, "unknown field %q: use %s", name, fieldList())
				case included[name]:
					errs.add(f, problem.CodeFormat, "field %s is listed twice", name)
				default:
					included[name] = true
					p.IncludeFields = append(p.IncludeFields, name)
				}
			}
		}
	}
	if v, ok := m["field_mapping"]; ok && v != nil {
		obj, isObj := v.(map[string]any)
		if !isObj {
			errs.add("payload.field_mapping", problem.CodeType, "payload.field_mapping must be an object of field names to new names")
		} else {
			p.FieldMapping = parseMapping(obj, p.IncludeFields, errs)
		}
	}
	if v, ok := m["include_full_fact"]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			errs.add("payload.include_full_fact", problem.CodeType, "payload.include_full_fact must be a boolean")
		}
		p.IncludeFullFact = b
	}
}

// parseMapping checks field_mapping against the fields the fact object
// will hold: a renamed field must be sent, and no two fields may end up
// under one key.
func parseMapping(obj map[string]any, include []string, errs *settingsErrors) map[string]string {
	sent := include
	if len(sent) == 0 {
		sent = defaultFields
	}
	sentSet := map[string]bool{}
	for _, f := range sent {
		sentSet[f] = true
	}
	out := map[string]string{}
	for _, from := range sortedKeys(obj) {
		field := "payload.field_mapping." + from
		to, isStr := obj[from].(string)
		switch {
		case !validField(from):
			errs.add(field, problem.CodeEnum, "unknown field %q: use %s", from, fieldList())
		case !isStr:
			errs.add(field, problem.CodeType, "the new name must be a string")
		case !mappedKeyRe.MatchString(to):
			errs.add(field, problem.CodeFormat, "the new name must be 1-64 letters, digits and _, starting with a letter or _")
		case !isSent(from, sentSet):
			errs.add(field, problem.CodeEnum, "field %s is not sent; add it to payload.include_fields", from)
		default:
			out[from] = to
		}
	}
	// The keys of the fact object after renaming must be distinct.
	keys := map[string]string{}
	for _, f := range sent {
		if strings.HasPrefix(f, "data.") && out[f] == "" {
			continue // stays inside data
		}
		k := outputKey(f, out)
		if other, dup := keys[k]; dup {
			errs.add("payload.field_mapping", problem.CodeFormat, "fields %s and %s would both be sent as %q", other, f, k)
			continue
		}
		keys[k] = f
	}
	for from, to := range out {
		if strings.HasPrefix(from, "data.") && !sentSet[from] {
			// data.<key> renamed out of a fully sent data object.
			if other, dup := keys[to]; dup {
				errs.add("payload.field_mapping", problem.CodeFormat, "fields %s and %s would both be sent as %q", other, from, to)
			}
			keys[to] = from
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isSent reports whether a field (or data.<key>) is part of the fact
// object given the sent field names.
func isSent(name string, sent map[string]bool) bool {
	if sent[name] {
		return true
	}
	return strings.HasPrefix(name, "data.") && sent["data"]
}

// outputKey is the key a sent field has in the fact object.
func outputKey(name string, mapping map[string]string) string {
	if to := mapping[name]; to != "" {
		return to
	}
	if k, ok := factFields[name]; ok {
		return k
	}
	return name
}

// secretPrefix starts every signing secret's text; a setting holding it
// holds a secret.
const secretPrefix = "whsec_"

const inlineSecret = "holds a signing secret (whsec_...): secrets are never inlined in settings; create one with POST /v1/admin/webhooks/secrets and reference it with secret_ref"

func parseHeaders(obj map[string]any, errs *settingsErrors) map[string]string {
	if len(obj) > maxHeaders {
		errs.add("headers", problem.CodeRange, "headers may hold at most %d entries", maxHeaders)
		return nil
	}
	out := map[string]string{}
	seen := map[string]string{}
	for _, name := range sortedKeys(obj) {
		field := "headers." + name
		v, isStr := obj[name].(string)
		lower := strings.ToLower(name)
		switch {
		case !headerRe.MatchString(name):
			errs.add(field, problem.CodeFormat, "header name %q is not a valid HTTP header name", name)
		case reservedHeaders[lower] || strings.HasPrefix(lower, "x-svc-") || strings.HasPrefix(lower, "proxy-"):
			errs.add(field, problem.CodeFormat, "header %s is set by the webhook service and cannot be overridden", name)
		case seen[lower] != "":
			errs.add(field, problem.CodeFormat, "header %s is given twice (as %s)", name, seen[lower])
		case !isStr:
			errs.add(field, problem.CodeType, "header values must be strings")
		case len(v) > 4096 || !httpguts.ValidHeaderFieldValue(v):
			errs.add(field, problem.CodeFormat, "header values must be at most 4096 characters without line breaks or other control characters")
		case strings.Contains(v, secretPrefix):
			errs.add(field, problem.CodeFormat, inlineSecret)
		default:
			seen[lower] = name
			out[name] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toMap renders settings as the JSON object stored in the config version.
func (s Settings) toMap() map[string]any {
	b, _ := json.Marshal(s)
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	_ = dec.Decode(&m)
	return m
}

// maxAttempts is the number of attempts a delivery gets: 1 when retries
// are disabled.
func (r RetrySettings) maxAttempts() int {
	if !r.Enabled {
		return 1
	}
	return r.MaxAttempts
}
