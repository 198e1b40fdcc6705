package sdk

import (
	"errors"
	"math/bits"
)

// MaxScale is the largest number of decimal places a Decimal holds.
const MaxScale = 18

// Decimal is an exact decimal number: a 128-bit coefficient and a scale of
// 0 to MaxScale decimal places, so about 38 significant digits. It is what
// plugins use for money: 0.1 added ten times is exactly 1.
//
// A Decimal is a value; the zero value is 0. Values are kept normalised
// (no trailing zeros after the point), so two Decimals are equal exactly
// when == says so. Add and Sub panic when a result needs more than 38
// digits (the SDK turns a panic into a status 5 reply); inputs read with
// ParseDecimal or Decoder.Decimal are checked, so with amounts of sensible
// size this cannot happen.
type Decimal struct {
	hi, lo uint64 // magnitude of the coefficient
	scale  uint8  // decimal places
	neg    bool
}

// Errors returned when parsing a Decimal.
var (
	ErrDecimalSyntax = errors.New("not a decimal number")
	ErrDecimalRange  = errors.New("decimal out of range (more than 38 digits)")
	ErrDecimalScale  = errors.New("decimal has more than 18 decimal places")
)

var pow10 = [20]uint64{
	1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
}

// NewDecimal returns coef × 10^-scale; NewDecimal(1, 1) is 0.1. It panics
// when scale is outside 0..MaxScale.
func NewDecimal(coef int64, scale int) Decimal {
	if scale < 0 || scale > MaxScale {
		panic("sdk: NewDecimal: scale out of range")
	}
	d := Decimal{scale: uint8(scale)}
	if coef < 0 {
		d.neg = true
		d.lo = uint64(-coef) // also right for math.MinInt64
	} else {
		d.lo = uint64(coef)
	}
	return d.norm()
}

// ParseDecimal parses a decimal in JSON number syntax ("12", "-0.5",
// "1.25e3").
func ParseDecimal(s string) (Decimal, error) { return parseDecimal([]byte(s)) }

// MustDecimal is ParseDecimal that panics on error, for constants.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic("sdk: MustDecimal(" + s + "): " + err.Error())
	}
	return d
}

func parseDecimal(b []byte) (Decimal, error) {
	var d Decimal
	i, n := 0, len(b)
	if i < n && b[i] == '-' {
		d.neg = true
		i++
	}
	intStart := i
	i = digitEnd(b, i)
	intPart := b[intStart:i]
	if len(intPart) == 0 || (len(intPart) > 1 && intPart[0] == '0') {
		return Decimal{}, ErrDecimalSyntax
	}
	var frac []byte
	if i < n && b[i] == '.' {
		fracStart := i + 1
		i = digitEnd(b, fracStart)
		if i == fracStart {
			return Decimal{}, ErrDecimalSyntax
		}
		frac = b[fracStart:i]
		for len(frac) > 0 && frac[len(frac)-1] == '0' {
			frac = frac[:len(frac)-1]
		}
	}
	scale := len(frac)
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < n && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		expStart := i
		i = digitEnd(b, i)
		exp := b[expStart:i]
		if len(exp) == 0 {
			return Decimal{}, ErrDecimalSyntax
		}
		for len(exp) > 1 && exp[0] == '0' {
			exp = exp[1:]
		}
		if len(exp) > 4 {
			return Decimal{}, ErrDecimalRange
		}
		if e := int(digitsAt(exp, 0, len(exp))); eneg {
			scale += e
		} else {
			scale -= e
		}
	}
	if i != n {
		return Decimal{}, ErrDecimalSyntax
	}
	if intPart[0] != '0' && !d.addDigits(intPart) || !d.addDigits(frac) {
		return Decimal{}, ErrDecimalRange
	}
	if d.isZero() {
		return Decimal{}, nil
	}
	for scale < 0 {
		k := min(-scale, 19)
		if !d.mulAdd(pow10[k], 0) {
			return Decimal{}, ErrDecimalRange
		}
		scale += k
	}
	for scale > 0 && d.rem10() == 0 {
		d.div10()
		scale--
	}
	if scale > MaxScale {
		return Decimal{}, ErrDecimalScale
	}
	d.scale = uint8(scale)
	return d, nil
}

// addDigits appends a run of ASCII digits to the coefficient, up to 19 at
// a time; false on overflow.
func (d *Decimal) addDigits(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), 19)
		if !d.mulAdd(pow10[k], digitsAt(b, 0, k)) {
			return false
		}
		b = b[k:]
	}
	return true
}

// digitEnd returns the index of the first non-digit of b at or after i.
func digitEnd(b []byte, i int) int {
	if i+8 <= len(b) {
		if m := nonDigit(load64(b, i)); m != 0 {
			return i + firstFlag(m)
		}
	}
	for i+8 <= len(b) {
		if m := nonDigit(load64(b, i)); m != 0 {
			return i + firstFlag(m)
		}
		i += 8
	}
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// Add returns d + e.
func (d Decimal) Add(e Decimal) Decimal {
	if e.isZero() {
		return d
	}
	if d.isZero() {
		return e
	}
	a, b := d, e
	if !align(&a, &b) {
		panic(ErrDecimalRange)
	}
	r := Decimal{scale: a.scale}
	if a.neg == b.neg {
		var carry uint64
		r.lo, carry = bits.Add64(a.lo, b.lo, 0)
		r.hi, carry = bits.Add64(a.hi, b.hi, carry)
		if carry != 0 {
			panic(ErrDecimalRange)
		}
		r.neg = a.neg
		return r.norm()
	}
	if cmpMag(a, b) < 0 {
		a, b = b, a
	}
	var borrow uint64
	r.lo, borrow = bits.Sub64(a.lo, b.lo, 0)
	r.hi, _ = bits.Sub64(a.hi, b.hi, borrow)
	r.neg = a.neg
	return r.norm()
}

// Sub returns d - e.
func (d Decimal) Sub(e Decimal) Decimal { return d.Add(e.Neg()) }

// Neg returns -d.
func (d Decimal) Neg() Decimal {
	if d.isZero() {
		return d
	}
	d.neg = !d.neg
	return d
}

// Abs returns |d|.
func (d Decimal) Abs() Decimal {
	d.neg = false
	return d
}

// Sign returns -1, 0 or 1.
func (d Decimal) Sign() int {
	switch {
	case d.isZero():
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// IsZero reports whether d is 0.
func (d Decimal) IsZero() bool { return d.isZero() }

// Cmp compares d and e: -1 when d < e, 0 when equal, 1 when d > e.
func (d Decimal) Cmp(e Decimal) int {
	ds, es := d.Sign(), e.Sign()
	if ds != es {
		if ds < es {
			return -1
		}
		return 1
	}
	if ds == 0 {
		return 0
	}
	a, b := d, e
	var c int
	if align(&a, &b) {
		c = cmpMag(a, b)
	} else if a.scale > d.scale {
		c = 1 // a overflowed while scaling up: its magnitude is the larger
	} else {
		c = -1
	}
	if ds < 0 {
		c = -c
	}
	return c
}

// Scale returns the number of decimal places of d (after normalisation:
// 1.50 has scale 1).
func (d Decimal) Scale() int { return int(d.scale) }

// String formats d in plain decimal notation, without exponent or
// trailing zeros: "1", "-0.25".
func (d Decimal) String() string { return string(d.Append(nil)) }

// Append appends the String form of d to b.
func (d Decimal) Append(b []byte) []byte {
	if d.neg {
		b = append(b, '-')
	}
	if d.hi == 0 && d.lo < 1e8 && d.scale < 8 {
		// The common amount: 8 digits in one word, no loop.
		var w [8]byte
		put64(w[:], itoa8(d.lo))
		s := int(d.scale)
		if s == 0 {
			return append(b, w[8-digitCount(d.lo):]...)
		}
		intDigits := max(digitCount(d.lo)-s, 1)
		b = append(b, w[8-s-intDigits:8-s]...)
		b = append(b, '.')
		return append(b, w[8-s:]...)
	}
	var digits [40]byte
	var ds []byte
	if d.hi == 0 {
		ds = appendUint(digits[:0], d.lo)
	} else {
		i := len(digits)
		for m := d; !m.isZero(); m.div10() {
			i--
			digits[i] = byte('0' + m.rem10())
		}
		ds = digits[i:]
	}
	sc := int(d.scale)
	if sc == 0 {
		return append(b, ds...)
	}
	if len(ds) <= sc {
		b = append(b, '0', '.')
		for k := len(ds); k < sc; k++ {
			b = append(b, '0')
		}
		return append(b, ds...)
	}
	b = append(b, ds[:len(ds)-sc]...)
	b = append(b, '.')
	return append(b, ds[len(ds)-sc:]...)
}

// MarshalJSON writes d as a JSON number literal with its exact digits.
func (d Decimal) MarshalJSON() ([]byte, error) { return d.Append(nil), nil }

// UnmarshalJSON reads a JSON number or a string holding one.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	v, err := parseDecimal(b)
	if err != nil {
		return &Error{Status: StatusBadInput, Code: "invalid_decimal", Message: err.Error()}
	}
	*d = v
	return nil
}

func (d Decimal) isZero() bool { return d.hi == 0 && d.lo == 0 }

// mulAdd sets the magnitude to m*mul + add; false on overflow.
func (d *Decimal) mulAdd(mul, add uint64) bool {
	h1, l1 := bits.Mul64(d.lo, mul)
	h2, l2 := bits.Mul64(d.hi, mul)
	if h2 != 0 {
		return false
	}
	hi, c := bits.Add64(l2, h1, 0)
	if c != 0 {
		return false
	}
	lo, c := bits.Add64(l1, add, 0)
	hi, c = bits.Add64(hi, 0, c)
	if c != 0 {
		return false
	}
	d.hi, d.lo = hi, lo
	return true
}

func (d *Decimal) rem10() uint64 {
	if d.hi == 0 {
		return d.lo % 10
	}
	_, r := bits.Div64(d.hi%10, d.lo, 10)
	return r
}

func (d *Decimal) div10() {
	if d.hi == 0 {
		d.lo /= 10
		return
	}
	q, r := d.hi/10, d.hi%10
	d.lo, _ = bits.Div64(r, d.lo, 10)
	d.hi = q
}

// norm strips trailing zeros and makes zero canonical.
func (d Decimal) norm() Decimal {
	if d.isZero() {
		return Decimal{}
	}
	for d.scale > 0 && d.rem10() == 0 {
		d.div10()
		d.scale--
	}
	return d
}

// align scales the one of a and b with fewer places up to the other's
// scale; false when that overflows.
func align(a, b *Decimal) bool {
	if a.scale == b.scale {
		return true
	}
	if a.scale < b.scale {
		a, b = b, a
	}
	for diff := a.scale - b.scale; diff > 0; {
		k := min(diff, 19)
		if !b.mulAdd(pow10[k], 0) {
			b.scale += k // mark which side overflowed (see Cmp)
			return false
		}
		b.scale += k
		diff -= k
	}
	return true
}

func cmpMag(a, b Decimal) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}
