package platform

import (
	"encoding/json"
	"testing"
)

// TestWholeNumber: an integer field takes a whole number in any spelling
// JSON allows, and nothing else.
func TestWholeNumber(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1700000000000", 1700000000000, true},
		{"1.7e12", 1700000000000, true},
		{"1E15", 1_000_000_000_000_000, true},
		{"1700000000000.0", 1700000000000, true},
		{"100e-2", 1, true},
		{"-5", -5, true},
		{"-0.0", 0, true},
		{"1.5", 0, false},
		{"1e-3", 0, false},
		{"9223372036854775808", 0, false},
		{"1e19", 0, false},
		{"1e999999999", 0, false},
		{"1e-999999999", 0, false},
	} {
		got, ok := WholeNumber(json.Number(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("WholeNumber(%s) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
