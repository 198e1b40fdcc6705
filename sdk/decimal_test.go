package sdk

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		scale    int
	}{
		{"0", "0", 0},
		{"-0", "0", 0},
		{"0.000", "0", 0},
		{"1", "1", 0},
		{"-12.50", "-12.5", 1},
		{"0.1", "0.1", 1},
		{"100", "100", 0},
		{"1e2", "100", 0},
		{"1.5E+3", "1500", 0},
		{"1250e-3", "1.25", 2},
		{"0.000000000000000001", "0.000000000000000001", 18},
		{"1.000000000000000000000000000000000000000000", "1", 0},
		{"99999999999999999999999999999999999999", "99999999999999999999999999999999999999", 0},
		{"123456789012345678.123456789012345678", "123456789012345678.123456789012345678", 18},
		{"1e-1000", "", 0},
	} {
		d, err := ParseDecimal(tc.in)
		if tc.want == "" {
			if !errors.Is(err, ErrDecimalScale) {
				t.Errorf("ParseDecimal(%q) = %v, %v; want ErrDecimalScale", tc.in, d, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDecimal(%q): %v", tc.in, err)
			continue
		}
		if d.String() != tc.want || d.Scale() != tc.scale {
			t.Errorf("ParseDecimal(%q) = %s (scale %d), want %s (scale %d)", tc.in, d, d.Scale(), tc.want, tc.scale)
		}
	}
}

func TestParseDecimalErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"", ErrDecimalSyntax},
		{"-", ErrDecimalSyntax},
		{"01", ErrDecimalSyntax},
		{"1.", ErrDecimalSyntax},
		{".5", ErrDecimalSyntax},
		{"1e", ErrDecimalSyntax},
		{"+1", ErrDecimalSyntax},
		{"1,5", ErrDecimalSyntax},
		{"0x10", ErrDecimalSyntax},
		{"NaN", ErrDecimalSyntax},
		{" 1", ErrDecimalSyntax},
		{"0.0000000000000000001", ErrDecimalScale},
		{"999999999999999999999999999999999999999", ErrDecimalRange},
		{"1e39", ErrDecimalRange},
		{"1e99999", ErrDecimalRange},
	} {
		if _, err := ParseDecimal(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("ParseDecimal(%q) error = %v, want %v", tc.in, err, tc.want)
		}
	}
}

func TestDecimalArithmetic(t *testing.T) {
	t.Parallel()
	m := MustDecimal
	for _, tc := range []struct{ a, b, sum, diff string }{
		{"0.1", "0.2", "0.3", "-0.1"},
		{"1", "-1", "0", "2"},
		{"-5.25", "2.75", "-2.5", "-8"},
		{"100", "0.001", "100.001", "99.999"},
		{"18446744073709551615", "1", "18446744073709551616", "18446744073709551614"},
		{"-18446744073709551616", "18446744073709551616", "0", "-36893488147419103232"},
		{"0", "7", "7", "-7"},
	} {
		a, b := m(tc.a), m(tc.b)
		if got := a.Add(b); got != m(tc.sum) {
			t.Errorf("%s + %s = %s, want %s", tc.a, tc.b, got, tc.sum)
		}
		if got := a.Sub(b); got != m(tc.diff) {
			t.Errorf("%s - %s = %s, want %s", tc.a, tc.b, got, tc.diff)
		}
	}
}

func TestDecimalTenthsAddUpExactly(t *testing.T) {
	t.Parallel()
	var sum Decimal
	tenth := MustDecimal("0.1")
	for range 10 {
		sum = sum.Add(tenth)
	}
	if sum != NewDecimal(1, 0) || sum.String() != "1" {
		t.Fatalf("0.1 added ten times = %s", sum)
	}
}

func TestDecimalCmp(t *testing.T) {
	t.Parallel()
	m := MustDecimal
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1", "1.0", 0},
		{"0.1", "0.10000", 0},
		{"-1", "1", -1},
		{"2", "10", -1},
		{"-2", "-10", 1},
		{"0", "-0.000001", 1},
		{"99999999999999999999999999999999999999", "0.000000000000000001", 1},
		{"0.000000000000000001", "99999999999999999999999999999999999999", -1},
		{"-99999999999999999999999999999999999999", "-0.000000000000000001", -1},
	} {
		if got := m(tc.a).Cmp(m(tc.b)); got != tc.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestDecimalOverflowPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r != ErrDecimalRange {
			t.Fatalf("recover() = %v, want ErrDecimalRange", r)
		}
	}()
	big := MustDecimal("99999999999999999999999999999999999999")
	_ = big.Add(big).Add(big).Add(big)
}

func TestDecimalJSON(t *testing.T) {
	t.Parallel()
	var v struct {
		A Decimal `json:"a"`
		B Decimal `json:"b"`
	}
	if err := json.Unmarshal([]byte(`{"a":12.50,"b":"-0.3"}`), &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"a":12.5,"b":-0.3}` {
		t.Fatalf("round trip = %s", out)
	}
	if err := json.Unmarshal([]byte(`{"a":"x"}`), &v); err == nil {
		t.Fatal("a non-number decoded")
	}
}

func TestNewDecimal(t *testing.T) {
	t.Parallel()
	if got := NewDecimal(-1250, 3).String(); got != "-1.25" {
		t.Fatalf("NewDecimal(-1250, 3) = %s", got)
	}
	if got := NewDecimal(-9223372036854775808, 0).String(); got != "-9223372036854775808" {
		t.Fatalf("NewDecimal(MinInt64) = %s", got)
	}
	if !NewDecimal(0, 5).IsZero() || NewDecimal(0, 5).Sign() != 0 {
		t.Fatal("zero")
	}
	if got := NewDecimal(-5, 1).Abs().String(); got != "0.5" {
		t.Fatalf("Abs = %s", got)
	}
}
