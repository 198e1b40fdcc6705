package storable

import (
	"bytes"
	"strconv"
)

// Numbers in stored JSON documents are kept in plain decimal notation, the
// form Postgres's jsonb keeps them in (its numeric prints no exponent and
// has no negative zero): 1e2 is stored as 100, 1.50e1 as 15.0, -0 as 0.
// Both stores store the form PlainNumbers gives, so a document reads back
// the same from either, and the same as the write that stored it answered.
// The value is never changed, only its spelling; the digits written out
// are bounded by MaxNumberDigits (NumberInRange), so a short exponent
// cannot become a long number in storage.

// PlainNumbers returns doc, a valid JSON document, with every number
// written in plain decimal notation. It returns doc itself when no number
// needs rewriting.
func PlainNumbers(doc []byte) []byte {
	var out []byte // nil until the first rewrite
	last := 0      // doc[last:] is not copied to out yet
	for i := 0; i < len(doc); {
		switch c := doc[i]; {
		case c == '"':
			i = skipString(doc, i)
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(doc) && isNumberByte(doc[j]) {
				j++
			}
			if plain, ok := plainNumber(doc[i:j]); ok {
				out = append(append(out, doc[last:i]...), plain...)
				last = j
			}
			i = j
		default:
			i++
		}
	}
	if out == nil {
		return doc
	}
	return append(out, doc[last:]...)
}

// skipString returns the index after the string starting at doc[i].
func skipString(doc []byte, i int) int {
	for i++; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// plainNumber rewrites a JSON number literal that has an exponent or is a
// negative zero; ok is false when lit is already plain (or not a number
// this can read). The scale follows Postgres's numeric: the literal's
// fraction digits less the exponent, at least zero.
func plainNumber(lit []byte) (plain []byte, ok bool) {
	neg := lit[0] == '-'
	body := lit
	if neg {
		body = lit[1:]
	}
	mant, expText, hasExp := bytes.Cut(body, []byte{'e'})
	if !hasExp {
		mant, expText, hasExp = bytes.Cut(body, []byte{'E'})
	}
	intPart, frac, _ := bytes.Cut(mant, []byte{'.'})
	digits := append(append([]byte(nil), intPart...), frac...)
	zero := bytes.Count(digits, []byte{'0'}) == len(digits)
	if !hasExp && !(neg && zero) {
		return nil, false
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(string(bytes.TrimPrefix(expText, []byte{'+'})))
		if err != nil || e > MaxNumberExponent || e < -MaxNumberExponent {
			return nil, false // out of range: refused by NumberInRange
		}
		exp = e
	}
	// value = digits × 10^(exp - len(frac)); scale digits after the point.
	shift := exp - len(frac)
	scale := max(0, -shift)
	if shift > 0 {
		digits = append(digits, bytes.Repeat([]byte{'0'}, shift)...)
	}
	if len(digits) <= scale { // a leading zero before the point
		digits = append(bytes.Repeat([]byte{'0'}, scale-len(digits)+1), digits...)
	}
	whole, fraction := digits[:len(digits)-scale], digits[len(digits)-scale:]
	whole = bytes.TrimLeft(whole, "0")
	if len(whole) == 0 {
		whole = []byte{'0'}
	}
	if neg && !zero {
		plain = append(plain, '-')
	}
	plain = append(plain, whole...)
	if scale > 0 {
		plain = append(append(plain, '.'), fraction...)
	}
	return plain, true
}
