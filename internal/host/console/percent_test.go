package console

import "testing"

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
