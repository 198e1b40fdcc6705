package platform

import "testing"

// TestParseRFC3339: time.Parse reads offsets RFC 3339 does not allow
// (+24:00, -23:60); they are refused, the others read as time.Parse does.
func TestParseRFC3339(t *testing.T) {
	for v, ok := range map[string]bool{
		"2026-11-01T00:00:00Z":          true,
		"2026-11-01T00:00:00+23:59":     true,
		"2026-11-01T00:00:00-00:00":     true,
		"2026-11-01T00:00:00.123+05:30": true,
		"2026-11-01t00:00:00z":          true,
		"2026-11-01t00:00:00.5+01:00":   true,
		"2026-11-01T00:00:00+24:00":     false,
		"2026-11-01T00:00:00-23:60":     false,
		"2026-11-01T00:00:00+99:00":     false,
		"2026-11-01T24:00:00Z":          false,
		"2026-11-01":                    false,
	} {
		if _, err := ParseRFC3339(v); (err == nil) != ok {
			t.Errorf("%s: error %v, want accepted %v", v, err, ok)
		}
	}
}

func FuzzParseRFC3339(f *testing.F) {
	for _, s := range []string{"2026-11-01T00:00:00Z", "2026-11-01T00:00:00+24:00", "2026-11-01T00:00:00.999999999-05:30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tm, err := ParseRFC3339(v)
		if err != nil {
			return
		}
		// What is read keeps an offset RFC 3339 allows.
		if _, off := tm.Zone(); off <= -24*3600 || off >= 24*3600 {
			t.Fatalf("%q read with offset %d s", v, off)
		}
	})
}
