package projection

import "time"

// Window is a time bucketing of facts, in UTC.
type Window string

// The time windows. A projection without a window has one bucket per group.
const (
	Minute Window = "minute"
	Hour   Window = "hour"
	Day    Window = "day"
	Month  Window = "month"
)

// windowAll names the single "time bucket" of a projection without a
// window in sparse storage keys.
const windowAll Window = "all"

// windowOrder is the rollup hierarchy, finest first.
var windowOrder = []Window{Minute, Hour, Day, Month}

func (w Window) valid() bool {
	switch w {
	case Minute, Hour, Day, Month:
		return true
	}
	return false
}

func (w Window) rank() int {
	for i, x := range windowOrder {
		if x == w {
			return i
		}
	}
	return -1
}

// bucketLen is the length of the bucket key of the window
// (YYYY-MM-DDTHH:mm, YYYY-MM-DDTHH, YYYY-MM-DD, YYYY-MM).
func (w Window) bucketLen() int {
	switch w {
	case Minute:
		return 16
	case Hour:
		return 13
	case Day:
		return 10
	case Month:
		return 7
	}
	return 0
}

const (
	msMinute = int64(60_000)
	msHour   = 60 * msMinute
	msDay    = 24 * msHour
)

// Supported fact times: years 1 to 9999, so that bucket keys keep their
// four-digit years. Facts outside are skipped (see doc.go).
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - 1
)

func timeInRange(ms int64) bool { return ms >= minTime && ms <= maxTime }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// civil returns the proleptic Gregorian date of a day number (days since
// 1970-01-01).
func civil(days int64) (y int64, m, d int) {
	// Shift the epoch to 0000-03-01 so leap days fall at the end of a
	// 400-year era; then a year is 365 days plus the leap rule.
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100) // [0, 365]
	mp := (5*doy + 2) / 153                  // [0, 11], March = 0
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// daysFromCivil is the inverse of civil.
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64(m + 9)
	if m > 2 {
		mp = int64(m - 3)
	}
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// start returns the start (ms) of the bucket holding ms.
func (w Window) start(ms int64) int64 {
	switch w {
	case Minute:
		return floorDiv(ms, msMinute) * msMinute
	case Hour:
		return floorDiv(ms, msHour) * msHour
	case Day:
		return floorDiv(ms, msDay) * msDay
	case Month:
		y, m, _ := civil(floorDiv(ms, msDay))
		return daysFromCivil(y, m, 1) * msDay
	}
	return 0
}

// next returns the start of the bucket after the one starting at start.
func (w Window) next(start int64) int64 {
	switch w {
	case Minute:
		return start + msMinute
	case Hour:
		return start + msHour
	case Day:
		return start + msDay
	case Month:
		y, m, _ := civil(floorDiv(start, msDay))
		m++
		if m > 12 {
			m, y = 1, y+1
		}
		return daysFromCivil(y, m, 1) * msDay
	}
	return start
}

// ceil returns the start of the first bucket starting at or after ms.
func (w Window) ceil(ms int64) int64 {
	s := w.start(ms)
	if s < ms {
		return w.next(s)
	}
	return s
}

// format appends the bucket key of the bucket starting at start.
func (w Window) format(dst []byte, start int64) []byte {
	days := floorDiv(start, msDay)
	y, m, d := civil(days)
	dst = append(dst, byte('0'+y/1000%10), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+m/10), byte('0'+m%10))
	if w == Month {
		return dst
	}
	dst = append(dst, '-', byte('0'+d/10), byte('0'+d%10))
	if w == Day {
		return dst
	}
	rem := start - days*msDay
	h := rem / msHour
	dst = append(dst, 'T', byte('0'+h/10), byte('0'+h%10))
	if w == Hour {
		return dst
	}
	mi := rem % msHour / msMinute
	return append(dst, ':', byte('0'+mi/10), byte('0'+mi%10))
}

// key returns the bucket key of the bucket starting at start.
func (w Window) key(start int64) string {
	var b [16]byte
	return string(w.format(b[:0], start))
}

// bucketCache remembers the last bucket of one window, since facts mostly
// arrive in time order.
type bucketCache struct {
	w          Window
	start, end int64
	key        string
}

func (c *bucketCache) lookup(ms int64) (int64, string) {
	if ms >= c.start && ms < c.end && c.key != "" {
		return c.start, c.key
	}
	c.start = c.w.start(ms)
	c.end = c.w.next(c.start)
	c.key = c.w.key(c.start)
	return c.start, c.key
}
