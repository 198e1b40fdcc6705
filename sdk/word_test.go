package sdk

import (
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestAppendUint(t *testing.T) {
	t.Parallel()
	vals := []uint64{0, 1, 9, 10, 99, 100, 12345678, 99999999, 1e8, 1e8 + 1, 1764000000000, 1e16 - 1, 1e16, 1<<64 - 1}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		vals = append(vals, r.Uint64()>>r.IntN(64))
	}
	for _, v := range vals {
		if got, want := string(appendUint(nil, v)), strconv.FormatUint(v, 10); got != want {
			t.Fatalf("appendUint(%d) = %s", v, got)
		}
		if got, want := digitCount(v), len(strconv.FormatUint(v, 10)); got != want {
			t.Fatalf("digitCount(%d) = %d, want %d", v, got, want)
		}
	}
}

func TestDigitsAt(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "7", "12", "1234567", "12345678", "123456789", "1234567890123456789"} {
		b := []byte(s + ",rest")
		want, _ := strconv.ParseUint(s, 10, 64)
		if got := digitsAt(b, 0, len(s)); got != want {
			t.Errorf("digitsAt(%s) = %d", s, got)
		}
		if got := digitsAt([]byte(s), 0, len(s)); got != want {
			t.Errorf("digitsAt(%s) at the end = %d", s, got)
		}
	}
}

// TestDecimalRandom checks parsing and formatting against math/big.
func TestDecimalRandom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		digits := make([]byte, 1+r.IntN(30))
		for i := range digits {
			digits[i] = byte('0' + r.IntN(10))
		}
		coef, _ := new(big.Int).SetString(string(digits), 10)
		scale := r.IntN(MaxScale + 1)
		s := coef.String()
		if scale > 0 {
			for len(s) <= scale {
				s = "0" + s
			}
			s = s[:len(s)-scale] + "." + s[len(s)-scale:]
		}
		if r.IntN(2) == 0 && coef.Sign() != 0 {
			s = "-" + s
		}
		d, err := ParseDecimal(s)
		if err != nil {
			t.Fatalf("ParseDecimal(%s): %v", s, err)
		}
		want, _ := new(big.Rat).SetString(s)
		got, _ := new(big.Rat).SetString(d.String())
		if want.Cmp(got) != 0 {
			t.Fatalf("ParseDecimal(%s).String() = %s", s, d.String())
		}
		for _, tail := range []string{"", "}", ",          "} { // the end of the input, and within it
			dec := NewDecoder([]byte(s + tail))
			d2, err := dec.Decimal()
			if err != nil || d2 != d {
				t.Fatalf("Decoder.Decimal(%q) = %v, %v; want %v", s+tail, d2, err, d)
			}
		}
	}
}
