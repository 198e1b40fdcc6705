package projection

import (
	"encoding/json"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
)

// Numbers are exact decimals: mantissa × 10^-scale with scale >= 0. Small
// mantissas live in an int64; larger ones in a big.Int. Nothing is ever
// accumulated in floating point.

// Bounds on what counts as a number (larger values are treated like
// non-numeric ones, see doc.go): at most maxIntDigits digits before the
// point and maxScale digits after it.
const (
	maxScale     = 64
	maxIntDigits = 64
	// avgScale is the number of digits after the point of an average.
	avgScale = 16
)

type number struct {
	m     int64
	b     *big.Int // the mantissa when non-nil (m is then unused)
	scale int32
}

var pow10 = func() [19]int64 {
	var p [19]int64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// mulPow10 returns m*10^k and whether it fits in an int64.
func mulPow10(m int64, k int32) (int64, bool) {
	if k == 0 || m == 0 {
		return m, true
	}
	if k >= int32(len(pow10)) {
		return 0, false
	}
	neg := m < 0
	u := uint64(m)
	if neg {
		u = uint64(-m)
	}
	hi, lo := bits.Mul64(u, uint64(pow10[k]))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(lo), true
	}
	return int64(lo), true
}

func (n number) bigMant() *big.Int {
	if n.b != nil {
		return n.b
	}
	return big.NewInt(n.m)
}

func (n number) isZero() bool {
	if n.b != nil {
		return n.b.Sign() == 0
	}
	return n.m == 0
}

var bigTen = big.NewInt(10)

func bigPow10(k int32) *big.Int {
	return new(big.Int).Exp(bigTen, big.NewInt(int64(k)), nil)
}

// rescaled returns the mantissa of n at a larger scale s as a big.Int.
func (n number) bigAt(s int32) *big.Int {
	m := new(big.Int).Set(n.bigMant())
	if s > n.scale {
		m.Mul(m, bigPow10(s-n.scale))
	}
	return m
}

// add returns a+b exactly.
func addNumbers(a, b number) number {
	if a.b == nil && b.b == nil {
		s := max(a.scale, b.scale)
		am, ok1 := mulPow10(a.m, s-a.scale)
		bm, ok2 := mulPow10(b.m, s-b.scale)
		if ok1 && ok2 {
			sum := am + bm
			// Overflow iff both operands have the same sign and the sum's
			// sign differs.
			if (am >= 0) != (bm >= 0) || (sum >= 0) == (am >= 0) {
				return number{m: sum, scale: s}
			}
		}
	}
	s := max(a.scale, b.scale)
	r := new(big.Int).Add(a.bigAt(s), b.bigAt(s))
	return normalizeBig(r, s)
}

// normalizeBig returns a number from a big mantissa, as int64 when it fits.
func normalizeBig(m *big.Int, s int32) number {
	if m.IsInt64() {
		return number{m: m.Int64(), scale: s}
	}
	return number{b: m, scale: s}
}

// cmpNumbers compares a and b by value.
func cmpNumbers(a, b number) int {
	if a.b == nil && b.b == nil {
		s := max(a.scale, b.scale)
		am, ok1 := mulPow10(a.m, s-a.scale)
		bm, ok2 := mulPow10(b.m, s-b.scale)
		if ok1 && ok2 {
			switch {
			case am < bm:
				return -1
			case am > bm:
				return 1
			}
			return 0
		}
	}
	s := max(a.scale, b.scale)
	return a.bigAt(s).Cmp(b.bigAt(s))
}

// String renders n in canonical form: no exponent, no leading zeros, no
// trailing zeros after the point, "0" for zero.
func (n number) String() string {
	if n.b == nil && n.scale <= 18 {
		var buf [48]byte
		return string(n.appendSmall(buf[:0]))
	}
	var digits string
	neg := false
	if n.b != nil && n.b.BitLen() <= 127 && n.scale <= 38 {
		var buf [48]byte
		return string(appendU128(buf[:0], n.b, n.scale))
	}
	if n.b != nil {
		digits = n.b.String()
	} else {
		digits = strconv.FormatInt(n.m, 10)
	}
	if digits[0] == '-' {
		neg, digits = true, digits[1:]
	}
	s := int(n.scale)
	if s > 0 {
		if len(digits) <= s {
			digits = strings.Repeat("0", s-len(digits)+1) + digits
		}
		intPart, frac := digits[:len(digits)-s], digits[len(digits)-s:]
		frac = strings.TrimRight(frac, "0")
		digits = intPart
		if frac != "" {
			digits += "." + frac
		}
	}
	if digits == "0" {
		return "0"
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// appendSmall appends an int64 mantissa with a scale of at most 18.
func (n number) appendSmall(dst []byte) []byte {
	u := uint64(n.m)
	if n.m < 0 {
		u = -u
	}
	var tmp [40]byte
	i := len(tmp)
	scale := int(n.scale)
	// Fraction digits, dropping trailing zeros.
	frac := false
	for d := 0; d < scale; d++ {
		digit := byte(u % 10)
		u /= 10
		if digit == 0 && !frac {
			continue
		}
		frac = true
		i--
		tmp[i] = '0' + digit
	}
	if frac {
		i--
		tmp[i] = '.'
	}
	if u == 0 {
		i--
		tmp[i] = '0'
	}
	for u > 0 {
		i--
		tmp[i] = byte('0' + u%10)
		u /= 10
	}
	if n.m < 0 && !(i == len(tmp)-1 && tmp[i] == '0') {
		dst = append(dst, '-')
	}
	return append(dst, tmp[i:]...)
}

// jsonNumber renders n as a json.Number.
func (n number) jsonNumber() json.Number { return json.Number(n.String()) }

// divInt returns n/d rounded to avgScale digits after the point (half away
// from zero).
func (n number) divInt(d int64) number {
	if q, ok := n.divIntFast(d); ok {
		return q
	}
	// mant × 10^-scale / d at avgScale: mant × 10^(avgScale-scale) / d.
	num, den := new(big.Int).Set(n.bigMant()), big.NewInt(d)
	if k := avgScale - n.scale; k >= 0 {
		num.Mul(num, bigPow10(k))
	} else {
		den.Mul(den, bigPow10(-k))
	}
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() != 0 && new(big.Int).Abs(r.Lsh(r, 1)).CmpAbs(den) >= 0 {
		if num.Sign() == den.Sign() {
			q.Add(q, bigOne)
		} else {
			q.Sub(q, bigOne)
		}
	}
	return normalizeBig(q, avgScale).fixScale()
}

var bigOne = big.NewInt(1)

// fixScale turns a negative scale (an exponent) into a scale of zero.
func (n number) fixScale() number {
	if n.scale >= 0 {
		return n
	}
	m := new(big.Int).Mul(n.bigMant(), bigPow10(-n.scale))
	return normalizeBig(m, 0)
}

// parseNumber parses text with the JSON number grammar exactly. ok is false
// for text that is not a number or lies beyond the bounds above.
func parseNumber(s string) (number, bool) {
	// Fast path: -?digits(.digits)? with at most 18 digits.
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	var m uint64
	nd := 0
	if i < len(s) && s[i] == '0' {
		i++
		nd = 1
	} else {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			m = m*10 + uint64(s[i]-'0')
			i++
			nd++
			if nd > 18 {
				return parseNumberSlow(s, true)
			}
		}
	}
	if i == start {
		return number{}, false
	}
	var scale int32
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			m = m*10 + uint64(s[i]-'0')
			i++
			nd++
			if nd > 18 {
				return parseNumberSlow(s, true)
			}
		}
		if i == fs {
			return number{}, false
		}
		scale = int32(i - fs)
	}
	if i != len(s) {
		if s[i] == 'e' || s[i] == 'E' {
			return parseNumberSlow(s, true)
		}
		return number{}, false
	}
	v := int64(m)
	if neg {
		v = -v
	}
	return number{m: v, scale: scale}, true
}

// parseStored parses a canonical decimal the engine itself wrote (a sum
// may exceed the bounds of input values).
func parseStored(s string) (number, bool) {
	if len(s) <= 18 {
		return parseNumber(s)
	}
	return parseNumberSlow(s, false)
}

func parseNumberSlow(s string, bounded bool) (number, bool) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	is := i
	if i < len(s) && s[i] == '0' {
		i++
	} else {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i == is {
		return number{}, false
	}
	intDigits := s[is:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == fs {
			return number{}, false
		}
		frac = s[fs:i]
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if exp < 1_000_000 {
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if i == es {
			return number{}, false
		}
		if eneg {
			exp = -exp
		}
		if !bounded && (exp > 100_000 || exp < -100_000) {
			return number{}, false
		}
	}
	if i != len(s) {
		return number{}, false
	}
	digits := strings.TrimLeft(intDigits+frac, "0")
	if digits == "" {
		return number{scale: 0}, true
	}
	// value = digits × 10^(exp - len(frac))
	e := exp - len(frac)
	// Drop trailing zeros of the mantissa into the exponent.
	for len(digits) > 1 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		e++
	}
	if bounded && (len(digits)+e > maxIntDigits || -e > maxScale) {
		return number{}, false
	}
	m, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return number{}, false
	}
	if neg {
		m.Neg(m)
	}
	if e >= 0 {
		m.Mul(m, bigPow10(int32(e)))
		return normalizeBig(m, 0), true
	}
	return normalizeBig(m, int32(-e)), true
}

// numberOf returns the numeric value of a fact value: JSON numbers
// (json.Number), Go numbers, and strings holding a JSON number. Anything
// else is not numeric.
func numberOf(v any) (number, bool) {
	switch x := v.(type) {
	case json.Number:
		return parseNumber(string(x))
	case string:
		return parseNumber(x)
	case int64:
		return number{m: x}, true
	case int:
		return number{m: int64(x)}, true
	case int32:
		return number{m: int64(x)}, true
	case uint64:
		if x <= math.MaxInt64 {
			return number{m: int64(x)}, true
		}
		return number{b: new(big.Int).SetUint64(x)}, true
	case uint32:
		return number{m: int64(x)}, true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return number{}, false
		}
		return parseNumber(strconv.FormatFloat(x, 'g', -1, 64))
	case float32:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return number{}, false
		}
		return parseNumber(strconv.FormatFloat(f, 'g', -1, 32))
	}
	return number{}, false
}

// limbBase splits mantissas into signed base-10^9 limbs for Redis, where
// each limb is added with HINCRBY: a limb field overflows only after
// about 9 billion additions.
const limbBase = 1_000_000_000

// limbs returns the mantissa of n as little-endian base-10^9 limbs that
// all carry the sign of n.
func (n number) limbs() []int64 {
	if n.b == nil {
		m := n.m
		if m == 0 {
			return nil
		}
		var out []int64
		for m != 0 {
			out = append(out, m%limbBase)
			m /= limbBase
		}
		return out
	}
	m := new(big.Int).Abs(n.b)
	neg := n.b.Sign() < 0
	base := big.NewInt(limbBase)
	var out []int64
	r := new(big.Int)
	for m.Sign() != 0 {
		m.QuoRem(m, base, r)
		l := r.Int64()
		if neg {
			l = -l
		}
		out = append(out, l)
	}
	return out
}

// divIntFast is divInt in integer arithmetic for int64 mantissas: the
// quotient and remainder of the mantissa by d, then the remainder's 16
// digits after the point (rounded), which always fit in 128 bits.
func (n number) divIntFast(d int64) (number, bool) {
	if n.b != nil || n.scale > avgScale || d <= 0 {
		return number{}, false
	}
	neg := n.m < 0
	u := uint64(n.m)
	if neg {
		u = -u
	}
	ud := uint64(d)
	q, r := u/ud, u%ud
	k := uint64(pow10[avgScale-n.scale])
	hi, lo := bits.Mul64(r, k) // r*k/d < k, so the quotient fits
	f, rr := bits.Div64(hi, lo, ud)
	if 2*rr >= ud { // half away from zero
		f++
	}
	// total = q*k + f, at scale 16
	th, tl := bits.Mul64(q, k)
	tl, carry := bits.Add64(tl, f, 0)
	th += carry
	scale := int32(avgScale)
	// Drop trailing zeros while the value does not fit an int64.
	for (th != 0 || tl > math.MaxInt64) && scale > 0 {
		if th >= 10 {
			break
		}
		qh := th / 10
		ql, r := bits.Div64(th%10, tl, 10)
		if r != 0 {
			break
		}
		th, tl, scale = qh, ql, scale-1
	}
	if th == 0 && tl <= math.MaxInt64 {
		v := int64(tl)
		if neg {
			v = -v
		}
		return number{m: v, scale: scale}, true
	}
	m := new(big.Int).SetUint64(th)
	m.Lsh(m, 64)
	m.Or(m, new(big.Int).SetUint64(tl))
	if neg {
		m.Neg(m)
	}
	return number{b: m, scale: scale}, true
}

// appendU128 appends a mantissa of at most 127 bits with a scale of at
// most 38 in canonical form, without big.Int formatting.
func appendU128(dst []byte, m *big.Int, scale int32) []byte {
	var hi, lo uint64
	words := m.Bits()
	if bits.UintSize == 64 {
		if len(words) > 0 {
			lo = uint64(words[0])
		}
		if len(words) > 1 {
			hi = uint64(words[1])
		}
	} else {
		var w [4]uint64
		for i, x := range words {
			w[i] = uint64(x)
		}
		lo, hi = w[0]|w[1]<<32, w[2]|w[3]<<32
	}
	var tmp [48]byte
	i := len(tmp)
	digits := 0
	frac := false
	for hi != 0 || lo != 0 || digits <= int(scale) {
		var r uint64
		hi, r = hi/10, hi%10
		lo, r = bits.Div64(r, lo, 10)
		if digits < int(scale) {
			if r != 0 || frac {
				frac = true
				i--
				tmp[i] = byte('0' + r)
			}
		} else {
			if digits == int(scale) && frac {
				i--
				tmp[i] = '.'
			}
			i--
			tmp[i] = byte('0' + r)
		}
		digits++
	}
	if m.Sign() < 0 && !(i == len(tmp)-1 && tmp[i] == '0') {
		dst = append(dst, '-')
	}
	return append(dst, tmp[i:]...)
}
