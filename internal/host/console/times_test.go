package console

import (
	"strings"
	"testing"
	"time"
)

func TestClockTime(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, ""},
		{float64(0), ""},
		{float64(1795803631123), "2026-11-27 18:20:31Z"},
		{int64(1795803631123), "2026-11-27 18:20:31Z"},
		// A plugin's load time comes as RFC 3339 text with nanoseconds.
		{"2026-11-27T18:20:31.123456789Z", "2026-11-27 18:20:31Z"},
		{"2026-11-27T19:20:31.5+01:00", "2026-11-27 18:20:31Z"},
		{"2026-11-27T18:20:31Z", "2026-11-27 18:20:31Z"},
		{"0001-01-01T00:00:00Z", ""},
		{"", ""},
		{"soon", "soon"},
	} {
		if got := clockTime(tc.in); got != tc.want {
			t.Errorf("clockTime(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPluginLoadTimeReadsLikeOtherTimes: the plugins view showed a load
// time as the API sent it (2026-11-27T18:20:31.123456789Z); it writes the
// API's milliseconds as every other view writes a time.
func TestPluginLoadTimeReadsLikeOtherTimes(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	at := float64(time.Date(2026, 11, 27, 18, 20, 31, 123_000_000, time.UTC).UnixMilli()) // as the API answers, decoded
	data := []map[string]any{{"name": "account", "version": "1.0.0", "loaded_at": at}}
	if err := pages["plugins"].Execute(&b, page{Name: "plugins", Mode: "admin", Operator: true, Data: data}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, `<td class="loaded-at">2026-11-27 18:20:31Z</td>`) || strings.Contains(out, "1795") {
		t.Errorf("the plugins view writes the load time otherwise than the other views' times:\n%s", out)
	}
}
