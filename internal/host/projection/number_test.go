package projection

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestParseNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"0", "0", true}, {"-0", "0", true}, {"-0.000", "0", true}, {"1.50", "1.5", true}, {"-12.345", "-12.345", true},
		{"1e3", "1000", true}, {"1.5E-3", "0.0015", true}, {"123456789012345678901234567890", "123456789012345678901234567890", true},
		{"0.000000000000000000001", "0.000000000000000000001", true}, {"9223372036854775808", "9223372036854775808", true},
		{"1e64", "", false}, {"1e63", "1" + fmt.Sprintf("%063d", 0), true}, {"1e-65", "", false},
		{"01", "", false}, {"1.", "", false}, {".5", "", false}, {"+1", "", false}, {"1e", "", false}, {"", "", false},
		{"abc", "", false}, {" 1", "", false}, {"NaN", "", false},
	} {
		n, ok := parseNumber(tc.in)
		if ok != tc.ok || (ok && n.String() != tc.want) {
			t.Errorf("parseNumber(%q) = %v %v, want %q %v", tc.in, n, ok, tc.want, tc.ok)
		}
	}
}

func ref(n number) *big.Rat {
	return new(big.Rat).SetFrac(n.bigMant(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.scale)), nil))
}

func randNumber(r *rand.Rand) number {
	switch r.IntN(4) {
	case 0:
		n, _ := parseNumber(fmt.Sprintf("%d.%0*d", r.Int64N(1e12)-5e11, r.IntN(6)+1, r.IntN(1000)))
		return n
	case 1:
		n, _ := parseNumber(fmt.Sprintf("%d", r.Int64()-r.Int64()))
		return n
	case 2:
		n, _ := parseNumber(fmt.Sprintf("-%d%d.%d", r.Uint64(), r.Uint64(), r.Uint64()))
		return n
	}
	n, _ := parseNumber(fmt.Sprintf("%d", r.IntN(100)))
	return n
}

// TestArithmetic checks addition, comparison, limbs and averages against
// big.Rat and shopspring/decimal on random values, small and huge.
func TestArithmetic(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		a, b := randNumber(r), randNumber(r)
		sum := addNumbers(a, b)
		if ref(sum).Cmp(new(big.Rat).Add(ref(a), ref(b))) != 0 {
			t.Fatalf("%s + %s = %s", a, b, sum)
		}
		if got, want := cmpNumbers(a, b), ref(a).Cmp(ref(b)); got != want {
			t.Fatalf("cmp(%s, %s) = %d, want %d", a, b, got, want)
		}
		// limbs rebuild the mantissa
		m := new(big.Int)
		for li, l := range sum.limbs() {
			x := big.NewInt(l)
			x.Mul(x, new(big.Int).Exp(big.NewInt(limbBase), big.NewInt(int64(li)), nil))
			m.Add(m, x)
		}
		if m.Cmp(sum.bigMant()) != 0 {
			t.Fatalf("limbs of %s rebuild %s", sum, m)
		}
		d := int64(r.IntN(1000) + 1)
		want := roundRat(new(big.Rat).Quo(ref(sum), new(big.Rat).SetInt64(d)), avgScale)
		got := sum.divInt(d)
		if ref(got).Cmp(want) != 0 {
			t.Fatalf("%s / %d = %s, want %s", sum, d, got, want.FloatString(avgScale))
		}
		if s, ok := parseStored(sum.String()); !ok || cmpNumbers(s, sum) != 0 {
			t.Fatalf("stored form of %s does not parse back", sum)
		}
	}
}

func TestNumberString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    number
		want string
	}{
		{number{m: 0}, "0"}, {number{m: 0, scale: 5}, "0"}, {number{m: -0, scale: 2}, "0"}, {number{m: 150, scale: 2}, "1.5"},
		{number{m: -5, scale: 3}, "-0.005"}, {number{m: 1000, scale: 3}, "1"}, {number{m: -1000, scale: 3}, "-1"},
		{number{m: -9223372036854775808, scale: 18}, "-9.223372036854775808"}, {number{m: 9223372036854775807}, "9223372036854775807"},
		{number{m: 123, scale: 18}, "0.000000000000000123"}, {number{m: 5, scale: 20}, "0.00000000000000000005"},
	} {
		if got := tc.n.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.n, got, tc.want)
		}
	}
}

// roundRat rounds x to scale digits after the point, half away from zero.
func roundRat(x *big.Rat, scale int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	y := new(big.Rat).Mul(x, new(big.Rat).SetInt(p))
	q, r := new(big.Int).QuoRem(y.Num(), y.Denom(), new(big.Int))
	if new(big.Int).Lsh(new(big.Int).Abs(r), 1).Cmp(y.Denom()) >= 0 {
		q.Add(q, big.NewInt(int64(y.Num().Sign())))
	}
	return new(big.Rat).SetFrac(q, p)
}
