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
// time.RFC3339Nano, refusing the offsets RFC 3339 does not allow.
func ParseRFC3339(v string) (time.Time, error) {
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
