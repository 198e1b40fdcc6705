package projection

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Config is a projection configuration (ProjectionConfig, and with Rollup
// the settings form ProjectionConfigSettings). Build it with ParseConfig,
// ParseSettings or ParseVersioned, or fill it in and call Validate. An
// engine never changes its Config.
type Config struct {
	// Source is the source entity type. The engine aggregates the facts it
	// is given; the caller that feeds it (the fact stream wiring, a
	// FactSource) selects facts of this entity type.
	Source string `json:"source" yaml:"source"`
	// FactTypes lists the fact types aggregated; other facts are ignored.
	FactTypes []string `json:"factTypes" yaml:"factTypes"`
	// TimeWindow buckets facts by time (UTC); empty for no time buckets.
	TimeWindow Window `json:"timeWindow,omitempty" yaml:"timeWindow,omitempty"`
	// GroupBy lists grouping fields (dot notation, such as data.country).
	GroupBy []string `json:"groupBy,omitempty" yaml:"groupBy,omitempty"`
	// Aggregations lists what each bucket computes.
	Aggregations []Aggregation `json:"aggregations" yaml:"aggregations"`
	// Materialize stores results in cached state.
	Materialize bool `json:"materialize" yaml:"materialize"`
	// StorageVersion is 1 (one blob per projection key) or 2 (one entry
	// per bucket). Zero means 1.
	StorageVersion int `json:"storageVersion" yaml:"storageVersion"`
	// Rollup configures rollups to coarser windows (settings form).
	Rollup *RollupConfig `json:"rollup,omitempty" yaml:"rollup,omitempty"`
}

// Function is an aggregation function.
type Function string

// The aggregation functions.
const (
	Count         Function = "count"
	Sum           Function = "sum"
	Avg           Function = "avg"
	Min           Function = "min"
	Max           Function = "max"
	CountDistinct Function = "count_distinct"
)

var functions = []Function{Count, Sum, Avg, Min, Max, CountDistinct}

// Aggregation is one aggregated value of a bucket. Field is a dot path
// into the fact (data.payment.amount), or "count" for the count function.
type Aggregation struct {
	Field    string   `json:"field" yaml:"field"`
	Function Function `json:"function" yaml:"function"`
}

// ResultKey is the key of the aggregation in results: count, or the field
// without its leading "data." and with dots as underscores, followed by
// _sum, _avg, _min, _max or _distinct.
func (a Aggregation) ResultKey() string {
	if a.Function == Count {
		return "count"
	}
	suffix := string(a.Function)
	if a.Function == CountDistinct {
		suffix = "distinct"
	}
	return resultField(a.Field) + "_" + suffix
}

// resultField is the <field> of a result key.
func resultField(field string) string {
	return strings.ReplaceAll(strings.TrimPrefix(field, "data."), ".", "_")
}

// RollupConfig enables rollups from the configuration's window to every
// coarser one (minute to hour to day to month).
type RollupConfig struct {
	Enabled   bool      `json:"enabled" yaml:"enabled"`
	Retention Retention `json:"retention" yaml:"retention"`
}

// Retention gives, per window, how many days its buckets are kept once
// rolled up; 0 keeps them forever.
type Retention struct {
	Minute int `json:"minute" yaml:"minute"`
	Hour   int `json:"hour" yaml:"hour"`
	Day    int `json:"day" yaml:"day"`
	Month  int `json:"month" yaml:"month"`
}

func (r Retention) days(w Window) int {
	switch w {
	case Minute:
		return r.Minute
	case Hour:
		return r.Hour
	case Day:
		return r.Day
	case Month:
		return r.Month
	}
	return 0
}

// storageVersion returns the effective storage version.
func (c *Config) storageVersion() int {
	if c.StorageVersion == 0 {
		return 1
	}
	return c.StorageVersion
}

func (c *Config) rollupEnabled() bool { return c.Rollup != nil && c.Rollup.Enabled }

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	d := *c
	d.FactTypes = slices.Clone(c.FactTypes)
	d.GroupBy = slices.Clone(c.GroupBy)
	d.Aggregations = slices.Clone(c.Aggregations)
	if c.Rollup != nil {
		r := *c.Rollup
		d.Rollup = &r
	}
	return &d
}

// Validate checks a configuration built in code; it returns a
// *ConfigValidationError listing every issue.
func (c *Config) Validate() error {
	v := &validator{}
	v.config(c, "", false, nil)
	return v.err("invalid projection config")
}

// VersionedConfig is the versioned wrapper of projection settings, as
// stored by the platform's configs (type "projection", scope "platform").
type VersionedConfig struct {
	ID          string  `json:"id" yaml:"id"`
	Type        string  `json:"type" yaml:"type"`
	Scope       string  `json:"scope" yaml:"scope"`
	Version     int     `json:"version" yaml:"version"`
	TenantID    string  `json:"tenant_id" yaml:"tenant_id"`
	Settings    *Config `json:"settings" yaml:"settings"`
	EffectiveAt int64   `json:"effective_at" yaml:"effective_at"`
}

// Wrapper values of VersionedConfig.
const (
	VersionedType  = "projection"
	VersionedScope = "platform"
)

// Validate checks the wrapper and its settings (in the settings form:
// storageVersion required).
func (vc *VersionedConfig) Validate() error {
	v := &validator{}
	v.versioned(vc, nil)
	return v.err("invalid versioned projection config")
}

// validator collects issues. line maps a path ("aggregations[0].field")
// to its line in the source document, when there is one.
type validator struct {
	issues []issue
	lines  map[string]int
	// bad holds paths that already have a type issue; semantic checks of
	// them would only repeat it.
	bad map[string]bool
}

type issue struct {
	line    int
	path    string
	text    string // without path and line
	msg     string
	missing bool
}

func (v *validator) add(path, format string, args ...any) {
	v.addIssue(path, false, format, args...)
}

// missing records that path is absent.
func (v *validator) missing(path, format string, args ...any) {
	v.addIssue(path, true, format, args...)
}

func (v *validator) addIssue(path string, missing bool, format string, args ...any) {
	if v.bad[path] {
		return
	}
	text := fmt.Sprintf(format, args...)
	msg := text
	if path != "" {
		msg = path + ": " + msg
	}
	l := v.lineOf(path)
	if l > 0 {
		msg = fmt.Sprintf("line %d: %s", l, msg)
	}
	v.issues = append(v.issues, issue{l, path, text, msg, missing})
}

// lineOf finds the line of path or of its nearest parent.
func (v *validator) lineOf(path string) int {
	for p := path; ; {
		if l, ok := v.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return v.lines[""]
		}
		p = p[:i]
	}
}

func (v *validator) err(msg string) error {
	if len(v.issues) == 0 {
		return nil
	}
	// In document order; issues without a line last.
	sort.SliceStable(v.issues, func(i, j int) bool {
		a, b := v.issues[i].line, v.issues[j].line
		if a == 0 || b == 0 {
			return a != 0 && b == 0
		}
		return a < b
	})
	out := make([]string, len(v.issues))
	details := make([]Issue, len(v.issues))
	for i, is := range v.issues {
		out[i] = is.msg
		details[i] = Issue{Line: is.line, Path: is.path, Message: is.text, Missing: is.missing}
	}
	n := len(out)
	s := "s"
	if n == 1 {
		s = ""
	}
	return &ConfigValidationError{Message: fmt.Sprintf("%s: %d issue%s", msg, n, s), Issues: out, Details: details}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// config validates the semantics of c. present reports which keys the
// document had (nil when validating a struct).
func (v *validator) config(c *Config, prefix string, settings bool, present map[string]bool) {
	has := func(k string) bool { return present == nil || present[join(prefix, k)] }
	if strings.TrimSpace(c.Source) == "" && has("source") {
		v.add(join(prefix, "source"), "must be a non-empty entity type")
	}
	if present != nil && !present[join(prefix, "source")] {
		v.missing(join(prefix, "source"), "is required")
	}
	if len(c.FactTypes) == 0 {
		if has("factTypes") {
			v.add(join(prefix, "factTypes"), "must list at least one fact type")
		} else {
			v.missing(join(prefix, "factTypes"), "is required")
		}
	}
	seen := map[string]bool{}
	for i, t := range c.FactTypes {
		p := fmt.Sprintf("%s[%d]", join(prefix, "factTypes"), i)
		switch {
		case strings.TrimSpace(t) == "":
			v.add(p, "must be a non-empty fact type")
		case seen[t]:
			v.add(p, "duplicate fact type %q", t)
		}
		seen[t] = true
	}
	if c.TimeWindow != "" && !c.TimeWindow.valid() {
		v.add(join(prefix, "timeWindow"), "must be one of minute, hour, day, month (got %q)", string(c.TimeWindow))
	}
	seen = map[string]bool{}
	for i, g := range c.GroupBy {
		p := fmt.Sprintf("%s[%d]", join(prefix, "groupBy"), i)
		if msg := checkPath(g); msg != "" {
			v.add(p, "%s", msg)
		} else if seen[g] {
			v.add(p, "duplicate groupBy field %q", g)
		}
		seen[g] = true
	}
	if len(c.Aggregations) == 0 {
		if has("aggregations") {
			v.add(join(prefix, "aggregations"), "must list at least one aggregation")
		} else {
			v.missing(join(prefix, "aggregations"), "is required")
		}
	}
	keys := map[string]int{}
	for i, a := range c.Aggregations {
		p := fmt.Sprintf("%s[%d]", join(prefix, "aggregations"), i)
		fnOK := slices.Contains(functions, a.Function)
		switch {
		case a.Function == "":
			v.missing(p+".function", "is required (one of count, sum, avg, min, max, count_distinct)")
		case !fnOK:
			v.add(p+".function", "unknown function %q (one of count, sum, avg, min, max, count_distinct)", string(a.Function))
		}
		fieldOK := true
		switch {
		case a.Field == "":
			v.missing(p+".field", "is required (use \"count\" with the count function)")
			fieldOK = false
		case a.Function == Count && a.Field != "count":
			v.add(p+".field", "the count function takes field \"count\" (got %q)", a.Field)
			fieldOK = false
		case a.Field == "count" && fnOK && a.Function != Count:
			v.add(p+".field", "\"count\" is the field of the count function; %s needs a fact field such as data.amount", a.Function)
			fieldOK = false
		case a.Field != "count":
			if msg := checkPath(a.Field); msg != "" {
				v.add(p+".field", "%s", msg)
				fieldOK = false
			}
		}
		if fnOK && fieldOK {
			k := a.ResultKey()
			if j, dup := keys[k]; dup {
				v.add(p, "result key %q is already produced by aggregations[%d]", k, j)
			} else {
				keys[k] = i
			}
		}
	}
	if present != nil && !present[join(prefix, "materialize")] {
		v.missing(join(prefix, "materialize"), "is required (true or false)")
	}
	switch {
	case c.StorageVersion == 0 && settings && (present == nil || !present[join(prefix, "storageVersion")]):
		v.missing(join(prefix, "storageVersion"), "is required in the settings form (1 or 2)")
	case c.StorageVersion == 0 && present != nil && present[join(prefix, "storageVersion")]:
		v.add(join(prefix, "storageVersion"), "must be 1 or 2 (got 0)")
	case c.StorageVersion != 0 && c.StorageVersion != 1 && c.StorageVersion != 2:
		v.add(join(prefix, "storageVersion"), "must be 1 or 2 (got %d)", c.StorageVersion)
	}
	if c.Rollup != nil {
		v.rollup(c, join(prefix, "rollup"))
	}
}

func (v *validator) rollup(c *Config, p string) {
	r := c.Rollup
	ret := r.Retention
	for _, w := range windowOrder {
		if d := ret.days(w); d < 0 {
			v.add(p+".retention."+string(w), "must be a number of days >= 0 (0 keeps forever), got %d", d)
		}
	}
	if !r.Enabled {
		return
	}
	if c.TimeWindow == "" {
		v.add(p+".enabled", "rollups need a timeWindow")
		return
	}
	if !c.TimeWindow.valid() {
		return
	}
	if c.TimeWindow == Month {
		v.add(p+".enabled", "timeWindow month is the coarsest window; there is nothing to roll up to")
		return
	}
	base := c.TimeWindow.rank()
	for _, w := range windowOrder[:base] {
		if d := ret.days(w); d > 0 {
			v.add(p+".retention."+string(w), "has no effect: timeWindow is %s, so there are no %s buckets", c.TimeWindow, w)
		}
	}
	// Coarser buckets must be kept at least as long as finer ones, or a
	// range would have finer data but no coarser summary of it.
	levels := windowOrder[base:]
	for i := 1; i < len(levels); i++ {
		fine, coarse := ret.days(levels[i-1]), ret.days(levels[i])
		if fine < 0 || coarse < 0 {
			continue
		}
		if coarse != 0 && (fine == 0 || coarse < fine) {
			fd := fmt.Sprintf("%d days", fine)
			if fine == 0 {
				fd = "forever"
			}
			v.add(p+".retention."+string(levels[i]), "%d days is shorter than retention.%s (%s): coarser buckets must be kept at least as long as finer ones",
				coarse, levels[i-1], fd)
		}
	}
}

func (v *validator) versioned(vc *VersionedConfig, present map[string]bool) {
	has := func(k string) bool { return present == nil || present[k] }
	if vc.ID == "" {
		v.missing("id", "is required")
	}
	if vc.Type != VersionedType {
		if vc.Type == "" && !has("type") {
			v.missing("type", "is required (%q)", VersionedType)
		} else {
			v.add("type", "must be %q (got %q)", VersionedType, vc.Type)
		}
	}
	if vc.Scope != VersionedScope {
		if vc.Scope == "" && !has("scope") {
			v.missing("scope", "is required (%q)", VersionedScope)
		} else {
			v.add("scope", "must be %q (got %q)", VersionedScope, vc.Scope)
		}
	}
	if vc.Version < 1 {
		v.add("version", "must be an integer >= 1")
	}
	if vc.TenantID == "" {
		v.missing("tenant_id", "is required")
	}
	if vc.EffectiveAt < 0 {
		v.add("effective_at", "must be a timestamp in milliseconds >= 0")
	}
	if vc.Settings == nil {
		if !has("settings") || present == nil {
			v.missing("settings", "is required")
		}
		return
	}
	v.config(vc.Settings, "settings", true, present)
}
