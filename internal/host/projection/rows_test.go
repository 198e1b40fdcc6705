package projection

import (
	"reflect"
	"testing"
)

func TestRows(t *testing.T) {
	mk := func(t *testing.T, yaml string) *Engine {
		t.Helper()
		cfg, err := ParseConfig([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEngine(cfg, EngineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	const base = "source: account\nfactTypes: [deposit]\nmaterialize: false\naggregations: [{field: count, function: count}]\n"
	tests := []struct {
		name      string
		yaml      string
		result    Result
		aggregate bool
		want      []map[string]any
	}{
		{"flat", base, Result{"count": int64(3), "_meta": map[string]any{"config_version": 2}}, false,
			[]map[string]any{{"count": int64(3)}}},
		{"window", base + "timeWindow: minute\n",
			Result{"2024-01-15T10:31": map[string]any{"count": int64(1)}, "2024-01-15T10:30": map[string]any{"count": int64(2)}}, false,
			[]map[string]any{
				{"key": "2024-01-15T10:30", "bucket": "2024-01-15T10:30", "window": "minute", "count": int64(2)},
				{"key": "2024-01-15T10:31", "bucket": "2024-01-15T10:31", "window": "minute", "count": int64(1)},
			}},
		{"coarser bucket kept by retention", base + "timeWindow: minute\n",
			Result{"2024-01-15T10": map[string]any{"count": int64(60)}}, false,
			[]map[string]any{{"key": "2024-01-15T10", "bucket": "2024-01-15T10", "window": "hour", "count": int64(60)}}},
		{"window and groups", base + "timeWindow: minute\ngroupBy: [data.currency, data.note]\n",
			Result{"2024-01-15T10:30:EUR:a%3Ab": map[string]any{"count": int64(1)}}, false,
			[]map[string]any{{"key": "2024-01-15T10:30:EUR:a%3Ab", "bucket": "2024-01-15T10:30", "window": "minute",
				"group": map[string]any{"data.currency": "EUR", "data.note": "a:b"}, "count": int64(1)}}},
		{"groups without window", base + "groupBy: [data.currency]\n",
			Result{"USD": map[string]any{"count": int64(4)}, "EUR": map[string]any{"count": int64(1)}}, false,
			[]map[string]any{
				{"key": "EUR", "group": map[string]any{"data.currency": "EUR"}, "count": int64(1)},
				{"key": "USD", "group": map[string]any{"data.currency": "USD"}, "count": int64(4)},
			}},
		{"aggregated", base + "timeWindow: hour\n", Result{"aggregated": map[string]any{"count": int64(9)}}, true,
			[]map[string]any{{"key": "aggregated", "count": int64(9)}}},
		{"group value named aggregated", base + "groupBy: [data.kind]\n",
			Result{"aggregated": map[string]any{"count": int64(2)}}, false,
			[]map[string]any{{"key": "aggregated", "group": map[string]any{"data.kind": "aggregated"}, "count": int64(2)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mk(t, tt.yaml).Rows(tt.result, tt.aggregate)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Rows:\ngot  %v\nwant %v", got, tt.want)
			}
		})
	}
}
