package projection

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const validYAML = `
source: account
factTypes: [deposit, withdrawal]
timeWindow: hour
groupBy: [data.country]
aggregations:
  - field: count
    function: count
  - field: data.payment.amount
    function: sum
  - field: data.payment.amount
    function: avg
  - field: data.user_id
    function: count_distinct
materialize: true
`

func TestParseConfigValid(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig([]byte(validYAML))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Source: "account", FactTypes: []string{"deposit", "withdrawal"}, TimeWindow: Hour,
		GroupBy: []string{"data.country"},
		Aggregations: []Aggregation{
			{"count", Count}, {"data.payment.amount", Sum}, {"data.payment.amount", Avg}, {"data.user_id", CountDistinct},
		},
		Materialize: true,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	if c.storageVersion() != 1 {
		t.Fatalf("default storage version %d, want 1", c.storageVersion())
	}
	// JSON is accepted too (it is YAML).
	j, err := ParseConfig([]byte(`{"source":"account","factTypes":["deposit","withdrawal"],"timeWindow":"hour","groupBy":["data.country"],
		"aggregations":[{"field":"count","function":"count"},{"field":"data.payment.amount","function":"sum"},
		{"field":"data.payment.amount","function":"avg"},{"field":"data.user_id","function":"count_distinct"}],"materialize":true}`))
	if err != nil || !reflect.DeepEqual(j, want) {
		t.Fatalf("JSON form: %v %+v", err, j)
	}
	if err := want.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestResultKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a    Aggregation
		want string
	}{
		{Aggregation{"count", Count}, "count"},
		{Aggregation{"data.payment.amount", Sum}, "payment_amount_sum"},
		{Aggregation{"data.duration_ms", Avg}, "duration_ms_avg"},
		{Aggregation{"data.amount", Min}, "amount_min"},
		{Aggregation{"data.amount", Max}, "amount_max"},
		{Aggregation{"data.user.id", CountDistinct}, "user_id_distinct"},
		{Aggregation{"subtype", CountDistinct}, "subtype_distinct"},
	} {
		if got := tc.a.ResultKey(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.a, got, tc.want)
		}
	}
}

func TestParseConfigSyntaxErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"unclosed flow list", "source: a\nfactTypes: [x\n", -1, "did not find expected ',' or ']'"},
		{"unclosed quote", "source: a\nfactTypes: [x]\nmaterialize: \"yes\n", 3, "found unexpected end of stream"},
		{"bad indentation", "source: a\n  bad: indent\n", 2, "mapping values are not allowed in this context"},
		{"two documents", "source: a\n---\nsource: b\n", 2, "more than one YAML document"},
		{"tab indentation", "source: a\n\tfactTypes: [x]\n", 2, "found a tab character that violates indentation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.src))
			var pe *ConfigParseError
			if !errors.As(err, &pe) {
				t.Fatalf("got %T %v, want *ConfigParseError", err, err)
			}
			if (tc.line >= 0 && pe.Line != tc.line) || pe.Line == 0 || !strings.Contains(pe.Message, tc.msg) {
				t.Fatalf("got line %d %q, want line %d %q", pe.Line, pe.Message, tc.line, tc.msg)
			}
		})
	}
}

func TestParseConfigValidation(t *testing.T) {
	t.Parallel()
	const ok = "source: a\nfactTypes: [x]\naggregations: [{field: count, function: count}]\nmaterialize: true\n"
	for _, tc := range []struct {
		name   string
		src    string
		issues []string
	}{
		{"empty document", "", []string{"the document is empty"}},
		{"not an object", "- a\n- b\n", []string{"line 1: must be an object (got a list)"}},
		{"missing everything", "{}", []string{
			"line 1: source: is required", "line 1: factTypes: is required",
			"line 1: aggregations: is required", "line 1: materialize: is required (true or false)"}},
		{"empty factTypes and aggregations", "source: a\nfactTypes: []\naggregations: []\nmaterialize: false\n", []string{
			"line 2: factTypes: must list at least one fact type",
			"line 3: aggregations: must list at least one aggregation"}},
		{"bad window", ok + "timeWindow: week\n", []string{
			`line 5: timeWindow: must be one of minute, hour, day, month (got "week")`}},
		{"bad storage version", ok + "storageVersion: 3\n", []string{"line 5: storageVersion: must be 1 or 2 (got 3)"}},
		{"storage version not a number", ok + "storageVersion: two\n", []string{"line 5: storageVersion: must be an integer (got a string)"}},
		{"source not a string", "source: [a]\nfactTypes: x\naggregations: [{field: count, function: count}]\nmaterialize: true\n", []string{
			"line 1: source: must be a string (got a list)",
			"line 2: factTypes: must be a list of strings (got a string)"}},
		{"materialize not a boolean", "source: a\nfactTypes: [x]\naggregations: [{field: count, function: count}]\nmaterialize: \"yes\"\n",
			[]string{"line 4: materialize: must be true or false (got a string)"}},
		{"unknown function", "source: a\nfactTypes: [x]\naggregations: [{field: data.a, function: median}]\nmaterialize: true\n",
			[]string{`line 3: aggregations[0].function: unknown function "median" (one of count, sum, avg, min, max, count_distinct)`}},
		{"count with a data field", "source: a\nfactTypes: [x]\naggregations: [{field: data.a, function: count}]\nmaterialize: true\n",
			[]string{`line 3: aggregations[0].field: the count function takes field "count" (got "data.a")`}},
		{"count field with another function", "source: a\nfactTypes: [x]\naggregations:\n  - {field: count, function: sum}\nmaterialize: true\n",
			[]string{`line 4: aggregations[0].field: "count" is the field of the count function; sum needs a fact field such as data.amount`}},
		{"missing field and function", "source: a\nfactTypes: [x]\naggregations:\n  - {}\nmaterialize: true\n", []string{
			"line 4: aggregations[0].function: is required (one of count, sum, avg, min, max, count_distinct)",
			`line 4: aggregations[0].field: is required (use "count" with the count function)`}},
		{"colliding result keys", "source: a\nfactTypes: [x]\naggregations:\n  - {field: data.a_b, function: sum}\n  - {field: data.a.b, function: sum}\nmaterialize: true\n",
			[]string{`line 5: aggregations[1]: result key "a_b_sum" is already produced by aggregations[0]`}},
		{"bad paths", ok + "groupBy: [country, data., data, id.x, data.a, data.a]\n", []string{
			`line 5: groupBy[0]: field "country": must start with "data." (a field of the fact's data) or be one of id, type, subtype, timestamp`,
			`line 5: groupBy[1]: field "data.": empty path segment`,
			`line 5: groupBy[2]: field "data": name a field inside data, such as data.amount`,
			`line 5: groupBy[3]: field "id.x": id has no nested fields`,
			`line 5: groupBy[5]: duplicate groupBy field "data.a"`}},
		{"colon in a path", ok + "groupBy: ['data.a:b']\n", []string{
			`line 5: groupBy[0]: field "data.a:b": path segments must not contain ':', '|' or control characters`}},
		{"unknown keys", ok + "factTypse: [y]\nwindow: hour\n", []string{
			`line 5: factTypse: unknown field (did you mean "factTypes"?)`,
			"line 6: window: unknown field (known: source, factTypes, timeWindow, groupBy, aggregations, materialize, storageVersion, rollup)"}},
		{"duplicate fact type", "source: a\nfactTypes: [x, x]\naggregations: [{field: count, function: count}]\nmaterialize: true\n",
			[]string{`line 2: factTypes[1]: duplicate fact type "x"`}},
		{"rollup without window", ok + "rollup: {enabled: true}\n", []string{"line 5: rollup.enabled: rollups need a timeWindow"}},
		{"rollup of month", ok + "timeWindow: month\nrollup: {enabled: true}\n", []string{
			"line 6: rollup.enabled: timeWindow month is the coarsest window; there is nothing to roll up to"}},
		{"bad retention", ok + "timeWindow: minute\nrollup:\n  enabled: true\n  retention: {minute: -1, hour: 1.5, weeks: 2}\n", []string{
			"line 8: rollup.retention.minute: must be a number of days >= 0 (0 keeps forever), got -1",
			"line 8: rollup.retention.hour: must be an integer (got a number)",
			"line 8: rollup.retention.weeks: unknown field (known: minute, hour, day, month)"}},
		{"retention beyond the integer range", ok + "timeWindow: minute\nrollup:\n  enabled: true\n  retention: {minute: 1000000000000}\n", []string{
			"line 8: rollup.retention.minute: is out of range (got 1000000000000)"}},
		{"storage version far out of range", "source: a\nfactTypes: [x]\naggregations: [{field: count, function: count}]\nmaterialize: true\nstorageVersion: 99999999999999999999\n", []string{
			"line 5: storageVersion: is out of range (got 99999999999999999999)"}},
		{"retention shorter for coarser windows", ok + "timeWindow: minute\nrollup:\n  enabled: true\n  retention: {minute: 7, hour: 3, day: 0, month: 30}\n", []string{
			"line 8: rollup.retention.hour: 3 days is shorter than retention.minute (7 days): coarser buckets must be kept at least as long as finer ones",
			"line 8: rollup.retention.month: 30 days is shorter than retention.day (forever): coarser buckets must be kept at least as long as finer ones"}},
		{"retention of a window below the base", ok + "timeWindow: hour\nrollup: {enabled: true, retention: {minute: 1}}\n", []string{
			"line 6: rollup.retention.minute: has no effect: timeWindow is hour, so there are no minute buckets"}},
		{"every problem at once", `source: ""
factTypes: []
timeWindow: week
aggregations:
  - {field: count, function: sum}
  - nope
materialize: 1
storageVersion: 0
`, []string{
			"line 1: source: must be a non-empty entity type",
			"line 2: factTypes: must list at least one fact type",
			`line 3: timeWindow: must be one of minute, hour, day, month (got "week")`,
			`line 5: aggregations[0].field: "count" is the field of the count function; sum needs a fact field such as data.amount`,
			"line 6: aggregations[1]: must be an object (got a string)",
			"line 7: materialize: must be true or false (got a number)",
			"line 8: storageVersion: must be 1 or 2 (got 0)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.src))
			var ve *ConfigValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %T %v, want *ConfigValidationError", err, err)
			}
			if !reflect.DeepEqual(ve.Issues, tc.issues) {
				t.Fatalf("issues:\n  %s\nwant:\n  %s", strings.Join(ve.Issues, "\n  "), strings.Join(tc.issues, "\n  "))
			}
			if !strings.Contains(ve.Error(), ve.Issues[0]) {
				t.Fatalf("Error() %q lacks the issues", ve.Error())
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	t.Parallel()
	_, err := ParseSettings([]byte("source: a\nfactTypes: [x]\naggregations: [{field: count, function: count}]\nmaterialize: true\n"))
	var ve *ConfigValidationError
	if !errors.As(err, &ve) || len(ve.Issues) != 1 || ve.Issues[0] != "line 1: storageVersion: is required in the settings form (1 or 2)" {
		t.Fatalf("settings without storageVersion: %v", err)
	}
	c, err := ParseSettings([]byte(`source: a
factTypes: [x]
timeWindow: minute
aggregations: [{field: count, function: count}]
materialize: true
storageVersion: 2
rollup:
  enabled: true
  retention: {minute: 1, hour: 7, day: 90, month: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.StorageVersion != 2 || !c.rollupEnabled() || c.Rollup.Retention != (Retention{1, 7, 90, 0}) {
		t.Fatalf("settings: %+v %+v", c, c.Rollup)
	}
}

func TestParseVersioned(t *testing.T) {
	t.Parallel()
	vc, err := ParseVersioned([]byte(`{"id":"cfg_1","type":"projection","scope":"platform","version":3,"tenant_id":"t1",
		"effective_at":1700000000000,"settings":{"source":"account","factTypes":["deposit"],
		"aggregations":[{"field":"count","function":"count"}],"materialize":true,"storageVersion":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if vc.ID != "cfg_1" || vc.Version != 3 || vc.TenantID != "t1" || vc.EffectiveAt != 1700000000000 || vc.Settings.StorageVersion != 2 {
		t.Fatalf("%+v", vc)
	}
	e, err := NewEngineFromVersioned(vc, EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := e.Process([]Fact{{ID: "a", Type: "deposit"}}, nil)
	if js(r) != `{"_meta":{"config_version":3},"count":1}` {
		t.Fatalf("result %s", js(r))
	}

	_, err = ParseVersioned([]byte(`{"id":"","type":"proj","version":0,"settings":{"source":"a"}}`))
	var ve *ConfigValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v", err)
	}
	want := []string{
		"line 1: id: is required",
		`line 1: type: must be "projection" (got "proj")`,
		`line 1: scope: is required ("platform")`,
		"line 1: version: must be an integer >= 1",
		"line 1: tenant_id: is required",
		"line 1: settings.factTypes: is required",
		"line 1: settings.aggregations: is required",
		"line 1: settings.materialize: is required (true or false)",
		"line 1: settings.storageVersion: is required in the settings form (1 or 2)",
	}
	if !reflect.DeepEqual(ve.Issues, want) {
		t.Fatalf("issues:\n  %s", strings.Join(ve.Issues, "\n  "))
	}
}

// FuzzParseConfig checks that the parser never panics and that whatever
// it accepts is valid and builds an engine.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validYAML))
	f.Add([]byte("source: a\nfactTypes: [x]\ntimeWindow: minute\naggregations: [{field: count, function: count}]\nmaterialize: true\nstorageVersion: 2\nrollup: {enabled: true, retention: {minute: 1}}\n"))
	f.Add([]byte("source: &a x\nfactTypes: [*a, *a]\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("- [a, {b: c}]"))
	f.Add([]byte("aggregations: [{field: data.a.b, function: count_distinct}]\ngroupBy: [subtype]"))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, parse := range []func([]byte) (*Config, error){ParseConfig, ParseSettings} {
			c, err := parse(src)
			if err != nil {
				var pe *ConfigParseError
				var ve *ConfigValidationError
				if !errors.As(err, &pe) && !errors.As(err, &ve) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				if ve != nil && len(ve.Issues) == 0 {
					t.Fatal("validation error without issues")
				}
				continue
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("accepted config fails Validate: %v", err)
			}
			if _, err := NewEngine(c, EngineOptions{}); err != nil {
				t.Fatalf("accepted config builds no engine: %v", err)
			}
		}
		if vc, err := ParseVersioned(src); err == nil {
			if err := vc.Validate(); err != nil {
				t.Fatalf("accepted versioned config fails Validate: %v", err)
			}
		}
	})
}
