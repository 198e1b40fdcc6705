package projector

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/projection"
)

func testConfig(t testing.TB) *projection.Config {
	cfg, err := projection.ParseSettings([]byte(`{source: contact, factTypes: [call], timeWindow: minute, groupBy: [data.channel, data.n],
aggregations: [{field: count, function: count}], materialize: true, storageVersion: 2}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestParseFilters(t *testing.T) {
	const jan15 = int64(1705276800000) // 2024-01-15T00:00:00Z
	tests := []struct {
		name    string
		filters string
		want    projection.QueryOptions
		fields  []string // validation errors expected, by field
	}{
		{"none", `{}`, projection.QueryOptions{Mode: projection.ModeMaterialized}, nil},
		{"ms range", `{"from": 1705276800000, "to": 1705276860000}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: jan15, To: jan15 + 60_000}, nil},
		{"text times", `{"from": "2024-01-15", "to": "2024-01-15T10:30"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: jan15, To: jan15 + 10*3_600_000 + 31*60_000 - 1}, nil},
		{"rfc 3339 with zone", `{"from": "2024-01-15T01:00:00+01:00"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: jan15}, nil},
		{"rfc 3339 in lower case", `{"from": "2024-01-15t00:00:00z"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: jan15}, nil},
		{"month and hour keys", `{"from": "2024-01", "to": "2024-01-15T10"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: 1704067200000, To: jan15 + 11*3_600_000 - 1}, nil},
		{"day and month keys end with their period", `{"from": "2024-01-15", "to": "2024-02"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: jan15, To: 1709251200000 - 1}, nil},
		{"a day key ends with the day", `{"to": "2024-01-15"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, To: jan15 + 86_400_000 - 1}, nil},
		{"rfc 3339 ends at its instant", `{"to": "2024-01-15T00:00:00Z"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, To: jan15}, nil},
		{"mode and aggregate", `{"mode": "compute", "aggregate": true}`,
			projection.QueryOptions{Mode: projection.ModeCompute, Aggregate: true}, nil},
		{"groups both ways", `{"groups": {"data.channel": "phone"}, "data.n": 5.0}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, Groups: map[string]string{"data.channel": "phone", "data.n": "5"}}, nil},
		{"a group value given twice alike", `{"groups": {"data.channel": "phone"}, "data.channel": "phone"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, Groups: map[string]string{"data.channel": "phone"}}, nil},
		{"a group value given twice otherwise", `{"groups": {"data.channel": "phone"}, "data.channel": "video"}`,
			projection.QueryOptions{}, []string{"filters.groups.data.channel"}},
		{"boolean group value", `{"data.channel": true}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, Groups: map[string]string{"data.channel": "true"}}, nil},
		{"every error at once", `{"from": "soon", "to": -5, "mode": "fast", "aggregate": 1, "groups": {"data.x": "a", "data.n": {}}, "limit": 3}`,
			projection.QueryOptions{}, []string{"filters.aggregate", "filters.from", "filters.groups.data.n", "filters.groups.data.x", "filters.limit", "filters.mode", "filters.to"}},
		{"from after to", `{"from": 1705276860000, "to": 1705276800000}`, projection.QueryOptions{}, []string{"filters.from"}},
		{"fractional ms", `{"from": 1.5}`, projection.QueryOptions{}, []string{"filters.from"}},
		{"whole ms with an exponent", `{"from": 1.7e12, "to": 1700000000001.0}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: 1_700_000_000_000, To: 1_700_000_000_001}, nil},
		{"from the epoch", `{"from": 0}`, projection.QueryOptions{Mode: projection.ModeMaterialized}, nil},
		{"to the epoch", `{"to": "1970-01-01T00:00:00Z"}`, projection.QueryOptions{}, []string{"filters.to"}},
		{"to the epoch's first day", `{"to": "1970-01-01"}`, projection.QueryOptions{Mode: projection.ModeMaterialized, To: 86_400_000 - 1}, nil},
		{"before the epoch", `{"from": -1, "to": "1969-12-31"}`, projection.QueryOptions{}, []string{"filters.from", "filters.to"}},
		{"sub-millisecond text", `{"from": "2024-01-15T00:00:00.0005Z", "to": "2024-01-15T00:00:00.0015Z"}`,
			projection.QueryOptions{Mode: projection.ModeMaterialized, From: jan15 + 1, To: jan15 + 1}, nil},
		{"groups not an object", `{"groups": ["a"]}`, projection.QueryOptions{}, []string{"filters.groups"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFilters(decode(t, tt.filters), testConfig(t))
			if tt.fields != nil {
				var perr *problem.Error
				if !errors.As(err, &perr) || perr.Kind != problem.ValidationFailed {
					t.Fatalf("got %v, want a validation problem", err)
				}
				var fields []string
				for _, fe := range perr.Errors {
					fields = append(fields, fe.Field)
				}
				if !reflect.DeepEqual(fields, tt.fields) {
					t.Errorf("error fields %v, want %v", fields, tt.fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func decode(t testing.TB, s string) map[string]any {
	var m map[string]any
	dec := json.NewDecoder(stringsReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzParseFilters: any JSON object of filters gives options or a
// validation problem, never a panic, and accepted options are usable.
func FuzzParseFilters(f *testing.F) {
	for _, s := range []string{`{}`, `{"from": "2024-01-15T10:30", "to": 1705276800000}`, `{"mode": "verify", "aggregate": true}`,
		`{"groups": {"data.channel": 1}}`, `{"from": -1}`, `{"x": null}`} {
		f.Add(s)
	}
	cfg := testConfig(f)
	f.Fuzz(func(t *testing.T, s string) {
		var m map[string]any
		dec := json.NewDecoder(stringsReader(s))
		dec.UseNumber()
		if dec.Decode(&m) != nil {
			return
		}
		q, err := parseFilters(m, cfg)
		if err != nil {
			var perr *problem.Error
			if !errors.As(err, &perr) || perr.Kind != problem.ValidationFailed || len(perr.Errors) == 0 {
				t.Fatalf("error is not a validation problem with field errors: %v", err)
			}
			return
		}
		if q.From != 0 && q.To != 0 && q.From > q.To {
			t.Fatalf("accepted from %d after to %d", q.From, q.To)
		}
		switch q.Mode {
		case projection.ModeMaterialized, projection.ModeCompute, projection.ModeVerify:
		default:
			t.Fatalf("accepted mode %q", q.Mode)
		}
	})
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// TestTimesBeforeTheEpochSaySo: a well-formed time before the epoch is a
// range problem that says so, not a claim that it is no time at all.
func TestTimesBeforeTheEpochSaySo(t *testing.T) {
	for _, v := range []any{"0001-01-01T00:00:00Z", "1969-12", json.Number("-1"), -5.0} {
		if _, code, msg := parseTime(v, true); code != problem.CodeRange || !strings.Contains(msg, "before the epoch") {
			t.Errorf("%v: %s %q, want a range problem about the epoch", v, code, msg)
		}
	}
	for _, v := range []any{json.Number("1.5"), 1.5, true} {
		if _, code, _ := parseTime(v, true); code != problem.CodeType {
			t.Errorf("%v: code %s, want type", v, code)
		}
	}
	// Text that is no time is in the wrong form, as on GET /v1/facts.
	for _, v := range []any{"soon", "2026-11-01T00:00:00+24:00", "2026-11-01T00:00:00-23:60"} {
		if _, code, _ := parseTime(v, true); code != problem.CodeFormat {
			t.Errorf("%v: code %s, want format", v, code)
		}
	}
}

// TestWholeTimesBeyondInt64AreOutOfRange: a from or to that is a whole
// number too large for int64 (1e20, 99999999999999999999, or such digits
// from a query string, which stay text) is a time out of range (code
// range), not "no time" (code type); a fraction is still a type error.
func TestWholeTimesBeyondInt64AreOutOfRange(t *testing.T) {
	cfg := testConfig(t)
	for _, tc := range []struct {
		filters, field, code, msg string
	}{
		{`{"from": 1e20}`, "filters.from", problem.CodeRange, "at most 9223372036854775807"},
		{`{"to": 99999999999999999999}`, "filters.to", problem.CodeRange, "at most 9223372036854775807"},
		{`{"to": 9223372036854775808}`, "filters.to", problem.CodeRange, "at most 9223372036854775807"},
		{`{"from": -1e20}`, "filters.from", problem.CodeRange, "before the epoch"},
		{`{"to": "99999999999999999999"}`, "filters.to", problem.CodeRange, "at most 9223372036854775807"},
		{`{"from": "-99999999999999999999"}`, "filters.from", problem.CodeRange, "before the epoch"},
		{`{"from": 1.5}`, "filters.from", problem.CodeType, "must be milliseconds"},
	} {
		t.Run(tc.filters, func(t *testing.T) {
			_, err := parseFilters(decode(t, tc.filters), cfg)
			var perr *problem.Error
			if !errors.As(err, &perr) || len(perr.Errors) != 1 {
				t.Fatalf("error %v, want one field error", err)
			}
			if fe := perr.Errors[0]; fe.Field != tc.field || fe.Code != tc.code || !strings.Contains(fe.Message, tc.msg) {
				t.Fatalf("%+v, want %s %s %q", fe, tc.field, tc.code, tc.msg)
			}
		})
	}
	// A float64 (a caller's own filters) beyond int64 likewise.
	if _, code, _ := parseTime(1e20, false); code != problem.CodeRange {
		t.Errorf("float64 1e20: code %s, want range", code)
	}
}

// TestProjectionListChecksItsQuery: GET /v1/projections takes no query
// parameter; one sent (?x=1) would be ignored, so it is refused.
func TestProjectionListChecksItsQuery(t *testing.T) {
	var got error
	app := fiber.New(fiber.Config{ErrorHandler: func(c *fiber.Ctx, err error) error { got = err; return c.SendStatus(400) }})
	app.Get("/v1/projections", (&Service{}).handleList)
	for _, q := range []string{"?x=1", "?limit=1&limit=2"} {
		got = nil
		if _, err := app.Test(httptest.NewRequest("GET", "/v1/projections"+q, nil)); err != nil {
			t.Fatal(err)
		}
		var perr *problem.Error
		if !errors.As(got, &perr) || perr.Kind != problem.ValidationFailed || len(perr.Errors) != 1 || perr.Errors[0].Code != problem.CodeUnknownField {
			t.Errorf("%s: error %v, want an unknown_field validation problem", q, got)
		}
	}
}
