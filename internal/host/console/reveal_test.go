package console

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"testing"
	"time"

	"github.com/factline/factline/internal/clock/clocktest"
)

// A sealed secret opens only in the session that made it, only within
// its time and only for a page that shows a secret.
func TestRevealOpensOnlyInItsSessionAndTime(t *testing.T) {
	sl, err := newSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	c := &Console{opts: Options{Clock: clk}, sealer: sl}
	mine, other := &session{id: "session-a"}, &session{id: "session-b"}
	seal := func(s *session, page string, expires time.Time) string {
		b := []byte(`{"page":"` + page + `","data":{"key":"fl_live_x"},"expires":` + strconv.FormatInt(expires.UnixMilli(), 10) + `}`)
		sealed, err := sl.seal(revealAAD(s), string(b))
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(sealed)
	}
	soon := clk.Now().Add(revealTTL)
	for _, tc := range []struct {
		name string
		s    *session
		raw  string
		ok   bool
	}{
		{"its session in time", mine, seal(mine, "new-key", soon), true},
		{"another session", other, seal(mine, "new-key", soon), false},
		{"expired", mine, seal(mine, "new-key", clk.Now().Add(-time.Millisecond)), false},
		{"a page that shows no secret", mine, seal(mine, "keys", soon), false},
		{"no cookie", mine, "", false},
		{"not base64", mine, "%%%", false},
		{"tampered", mine, seal(mine, "new-key", soon)[:40] + "AAAA", false},
	} {
		r, ok := c.openReveal(tc.s, tc.raw)
		if ok != tc.ok || ok && r.Data["key"] != "fl_live_x" {
			t.Errorf("%s: opened %v (%+v), want %v", tc.name, ok, r, tc.ok)
		}
	}
	// One sealed in time stops opening once the clock passes its expiry.
	raw := seal(mine, "secret", soon)
	clk.Advance(revealTTL + time.Millisecond)
	if _, ok := c.openReveal(mine, raw); ok {
		t.Error("a reveal cookie opened after its expiry")
	}
}
