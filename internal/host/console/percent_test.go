package console

import (
	"strings"
	"testing"
)

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"n/a", ""},
		{0.0, "0.0 %"},
		{1.0, "100.0 %"},
		{0.75, "75.0 %"},
		{2.0 / 3, "66.7 %"},
		// One failure in thousands is not 100 %, one success not 0 %.
		{0.99995, "99.9 %"},
		{0.00004, "0.1 %"},
	} {
		if got := percent(tc.in); got != tc.want {
			t.Errorf("percent(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLargeCountsAreWrittenOut: counts and positions come from JSON as
// float64, which a template prints as 1.234567e+06 from a million on.
func TestLargeCountsAreWrittenOut(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		page string
		data any
	}{
		{"projections", &chartData{Projections: []map[string]any{{"config_id": "cfg_1", "config_version": float64(1), "position": float64(1234567)}}}},
		{"plugins", []map[string]any{{"name": "account", "stats": map[string]any{"calls": float64(1234567), "errors": float64(2000000)}}}},
		{"dead-letters", map[string]any{"items": []map[string]any{{"delivery_id": "d1", "attempts": float64(1234567)}}}},
	} {
		var b strings.Builder
		if err := pages[tc.page].Execute(&b, page{Name: tc.page, Mode: "admin", Data: tc.data}); err != nil {
			t.Fatalf("%s: %v", tc.page, err)
		}
		if out := b.String(); strings.Contains(out, "e+06") || !strings.Contains(out, "1234567") {
			t.Errorf("%s shows a count in exponent form or not at all:\n%s", tc.page, out)
		}
	}
}
