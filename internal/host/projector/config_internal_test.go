package projector

import (
	"slices"
	"testing"
)

// TestSettingsProblemsSayWhatIsMissing: a settings member that is absent is
// the contract's `required`, as on every other endpoint; one present with
// a bad value is `format`.
func TestSettingsProblemsSayWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]any
		want     []string // "field code", in order
	}{
		{"nothing", map[string]any{}, []string{
			"settings.source required", "settings.factTypes required", "settings.aggregations required",
			"settings.materialize required", "settings.storageVersion required"}},
		{"present but bad", map[string]any{"source": " ", "factTypes": []any{}, "materialize": true, "storageVersion": 2,
			"aggregations": []any{map[string]any{"function": "count"}}}, []string{
			"settings.source format", "settings.factTypes format", "settings.aggregations[0].field required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := parseSettings(tc.settings)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+" "+e.Code)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors %v, want %v", got, tc.want)
			}
		})
	}
}
