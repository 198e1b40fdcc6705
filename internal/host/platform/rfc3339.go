package platform

import (
	"errors"
	"time"
)

// errTimeOffset: an RFC 3339 offset with an hour above 23 or a minute
// above 59, which time.Parse reads (+24:00, +23:60) but RFC 3339 does not
// allow.
var errTimeOffset = errors.New("time offset out of range: at most ±23:59")

// ParseRFC3339 reads an RFC 3339 time as time.Parse does with
// time.RFC3339Nano, refusing the offsets RFC 3339 does not allow and
// taking the lowercase t and z it allows (section 5.6).
func ParseRFC3339(v string) (time.Time, error) {
	v = UpperRFC3339(v)
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, err
	}
	if err := checkOffset(v); err != nil {
		return time.Time{}, err
	}
	return t, nil
}

// checkOffset checks the numeric offset that ends v, if any ("+hh:mm").
func checkOffset(v string) error {
	if len(v) < 6 {
		return nil
	}
	off := v[len(v)-6:]
	if off[0] != '+' && off[0] != '-' || off[3] != ':' {
		return nil // Z, or not a numeric offset (time.Parse checked the form)
	}
	if off[1:3] > "23" || off[4:6] > "59" {
		return errTimeOffset
	}
	return nil
}

// UpperRFC3339 returns v with the date-time separator t and the zone z
// of an RFC 3339 time in upper case, which is how time.Parse reads them;
// anything else is returned as it is.
func UpperRFC3339(v string) string {
	if len(v) < 11 || v[4] != '-' || v[7] != '-' {
		return v
	}
	b := []byte(v)
	if b[10] == 't' {
		b[10] = 'T'
	}
	if b[len(b)-1] == 'z' {
		b[len(b)-1] = 'Z'
	}
	return string(b)
}
