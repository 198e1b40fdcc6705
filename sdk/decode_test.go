package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

type testItem struct {
	Name  string
	Price Decimal
	Tags  []string
	Count int64
	On    bool
	Rate  float64
}

func (it *testItem) DecodeJSON(d *Decoder) error {
	return d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "name":
			it.Name, err = d.String()
		case "price":
			it.Price, err = d.Decimal()
		case "count":
			it.Count, err = d.Int()
		case "on":
			it.On, err = d.Bool()
		case "rate":
			it.Rate, err = d.Float()
		case "tags":
			err = d.Array(func() error {
				s, err := d.String()
				it.Tags = append(it.Tags, s)
				return err
			})
		default:
			err = d.Skip()
		}
		return err
	})
}

func TestDecoderObject(t *testing.T) {
	t.Parallel()
	in := ` { "name" : "caf\u00e9 \"x\"\n" , "price":"12.50", "tags":["a","b\\c"], "count":-42,
		"on":true, "rate":1.5e-3, "skip":{"x":[1,{"y":null}],"z":"}"}, "last":false } `
	var it testItem
	d := NewDecoder([]byte(in))
	if err := it.DecodeJSON(d); err != nil {
		t.Fatal(err)
	}
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
	want := testItem{Name: "café \"x\"\n", Price: MustDecimal("12.5"), Tags: []string{"a", `b\c`}, Count: -42, On: true, Rate: 0.0015}
	if it.Name != want.Name || it.Price != want.Price || strings.Join(it.Tags, "|") != strings.Join(want.Tags, "|") ||
		it.Count != want.Count || it.On != want.On || it.Rate != want.Rate {
		t.Fatalf("decoded %+v, want %+v", it, want)
	}
}

func TestDecoderErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, code, field string
	}{
		{`{"name":1}`, "invalid_type", "name"},
		{`{"price":"abc"}`, "invalid_decimal", "price"},
		{`{"price":1.0000000000000000001}`, "invalid_decimal", "price"},
		{`{"tags":["a",2]}`, "invalid_type", "tags[1]"},
		{`{"count":1.5}`, "invalid_type", "count"},
		{`{"count":99999999999999999999}`, "invalid_type", "count"},
		{`{"on":"yes"}`, "invalid_type", "on"},
		{`{"name":"x"`, "invalid_json", ""},
		{`{"name" "x"}`, "invalid_json", ""},
		{`{"name":"a` + "\x01" + `"}`, "invalid_json", "name"},
		{`{"skip":{"a":[1,}]}}`, "invalid_json", "skip.a[1]"},
		{`{"name":"\q"}`, "invalid_json", "name"},
		{`[1]`, "invalid_type", ""},
		{``, "invalid_type", ""},
	} {
		var it testItem
		err := it.DecodeJSON(NewDecoder([]byte(tc.in)))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v, want an *Error", tc.in, err)
			continue
		}
		if e.Status != StatusBadInput || e.Code != tc.code || e.Field != tc.field {
			t.Errorf("%s: got status %d code %q field %q (%s), want code %q field %q", tc.in, e.Status, e.Code, e.Field, e.Message, tc.code, tc.field)
		}
	}
}

func TestDecoderNullAndRaw(t *testing.T) {
	t.Parallel()
	d := NewDecoder([]byte(`[null, {"a" : [1, 2]}, "s"]`))
	var raws []string
	err := d.Array(func() error {
		if d.Null() {
			raws = append(raws, "null")
			return nil
		}
		b, err := d.Raw()
		raws = append(raws, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(raws, "|"); got != `null|{"a" : [1, 2]}|"s"` {
		t.Fatalf("raws = %s", got)
	}
	// null reads as an empty object or array.
	if err := NewDecoder([]byte("null")).Object(func([]byte) error { t.Fatal("member in null"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestDecoderValueFallsBackToJSON(t *testing.T) {
	t.Parallel()
	var v struct {
		A []int `json:"a"`
	}
	d := NewDecoder([]byte(`{"a":[1,2,3]} `))
	if err := d.Value(&v); err != nil || len(v.A) != 3 {
		t.Fatalf("Value = %v, %v", v, err)
	}
	err := NewDecoder([]byte(`{"a":"x"}`)).Value(&v)
	var e *Error
	if !errors.As(err, &e) || e.Code != "invalid_type" || e.Field != "a" {
		t.Fatalf("Value error = %#v", err)
	}
}

// TestBadDecimalNamesItsMember: encoding/json passes a Decimal's error on
// without the member it came from; the error names it, at any depth.
func TestBadDecimalNamesItsMember(t *testing.T) {
	t.Parallel()
	type line struct {
		Price Decimal `json:"price"`
	}
	var v struct {
		Amount Decimal            `json:"amount"`
		Lines  []line             `json:"lines"`
		Fees   map[string]Decimal `json:"fees"`
		Tip    *Decimal
	}
	type Base struct {
		Fee Decimal `json:"fee"`
	}
	var w struct {
		Base
		Amount Decimal `json:"amount"`
	}
	for in, field := range map[string]string{
		`{"fee":"bad"}`:               "fee",
		`{"amount":"x","amount":"1"}`: "amount",
		`{"Amount":"x","amount":"1"}`: "Amount",
	} {
		err := NewDecoder([]byte(in)).Value(&w)
		var e *Error
		if !errors.As(err, &e) || e.Code != "invalid_decimal" || e.Field != field {
			t.Errorf("Value(%s) = %#v, want invalid_decimal at %s", in, err, field)
		}
	}
	for in, field := range map[string]string{
		`{"amount":"abc"}`: "amount",
		`{"amount":1,"lines":[{"price":1},{"price":"x"}]}`: "lines[1].price",
		`{"fees":{"a":1,"b":"1e999999"}}`:                  "fees.b",
		`{"tip":"x"}`:                                      "tip",
	} {
		err := NewDecoder([]byte(in)).Value(&v)
		var e *Error
		if !errors.As(err, &e) || e.Code != "invalid_decimal" || e.Field != field {
			t.Errorf("Value(%s) = %#v, want invalid_decimal at %s", in, err, field)
		}
	}
	var d Decimal
	if err := NewDecoder([]byte(`"x"`)).Value(&d); err == nil || err.(*Error).Field != "" {
		t.Errorf("a Decimal of its own: %#v, want no field", err)
	}
}

func TestDecoderStrings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "1234567", "12345678", "a somewhat longer string with \"quotes\"", "\u2028\t\\/", "😀 surrogate", "é"} {
		enc, _ := json.Marshal(s)
		for _, in := range [][]byte{enc, append(enc, ",padding..."...)} {
			d := NewDecoder(in)
			got, err := d.String()
			if err != nil || got != s {
				t.Errorf("String(%s) = %q, %v", in, got, err)
			}
		}
	}
	// Escaped surrogate pairs and lone surrogates.
	for in, want := range map[string]string{`"\ud83d\ude00"`: "😀", `"\ud83d"`: "\ufffd", `"\ude00x"`: "\ufffdx"} {
		if got, err := NewDecoder([]byte(in)).String(); err != nil || got != want {
			t.Errorf("String(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestDecoderInt(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"0": 0, "7,": 7, "-7": -7, "1764000000000,": 1764000000000, "123456789012345,xxxxxxxxxxxx": 123456789012345,
		"9223372036854775807": 9223372036854775807, "-9223372036854775808": -9223372036854775808, " 12 ": 12,
	} {
		if got, err := NewDecoder([]byte(in)).Int(); err != nil || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"9223372036854775808", "-9223372036854775809", "01", "1e3", "1.0", "-", `"1"`} {
		if _, err := NewDecoder([]byte(in)).Int(); err == nil {
			t.Errorf("Int(%s) succeeded", in)
		}
	}
}

// FuzzDecoderSkip checks that Skip accepts exactly the JSON that
// encoding/json accepts, and that strings decode as encoding/json does.
func FuzzDecoderSkip(f *testing.F) {
	for _, s := range []string{`{}`, `[1,"a",{"b":null}]`, `"\u00e9"`, `-0.5e+10`, `{"a":[}`, `01`, `"\ud800"`, `tru`, `{"a" 1}`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(in)
		err := d.Skip()
		if err == nil {
			err = d.End()
		}
		if valid := json.Valid(in); valid != (err == nil) {
			t.Fatalf("Skip(%q) error %v, json.Valid %v", in, err, valid)
		}
		if err != nil || d.Peek() != 0 {
			return
		}
		var want any
		if json.Unmarshal(in, &want) != nil {
			return
		}
		if s, ok := want.(string); ok {
			if !utf8.Valid(in) || bytes.Contains(in, []byte(`\u`)) {
				return // encoding/json replaces invalid UTF-8 and lone surrogates its own way
			}
			got, err := NewDecoder(in).String()
			if err != nil || got != s {
				t.Fatalf("String(%q) = %q, %v; want %q", in, got, err, s)
			}
		}
	})
}

// FuzzDecimal checks that Decoder.Decimal and ParseDecimal agree and that
// a parsed decimal prints and parses back to itself.
func FuzzDecimal(f *testing.F) {
	for _, s := range []string{"0", "-12.50", "1e3", "0.000000000000000001", "123456789012345678901234567890", "1.5,", "7}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dec := NewDecoder([]byte(s + ",          "))
		if got, err := dec.Decimal(); err == nil && dec.pos == len(s) && strings.TrimLeft(s, "\" \t\r\n") == s {
			if want, err := ParseDecimal(s); err != nil || want != got {
				t.Fatalf("Decoder.Decimal(%q) = %v, but ParseDecimal gives %v, %v", s, got, want, err)
			}
		}
		d, err := ParseDecimal(s)
		if err != nil {
			return
		}
		again, err := ParseDecimal(d.String())
		if err != nil || again != d {
			t.Fatalf("ParseDecimal(%q) = %s, which parses as %v, %v", s, d, again, err)
		}
		for _, tail := range []string{",", ",          "} {
			got, err := NewDecoder([]byte(s + tail)).Decimal()
			if err != nil || got != d {
				t.Fatalf("Decoder.Decimal(%q) = %v, %v; want %v", s+tail, got, err, d)
			}
		}
	})
}

// TestDecoderKeyAtTheEnd: keys near the end of the input take the careful
// path.
func TestDecoderKeyAtTheEnd(t *testing.T) {
	t.Parallel()
	for n := 0; n < 40; n++ {
		for _, tail := range []string{`":1}`, `" :1}`, `":`, `"`} {
			in := `{"` + strings.Repeat("k", n) + tail
			d := NewDecoder([]byte(in))
			err := d.Object(func(key []byte) error {
				if len(key) != n {
					t.Fatalf("%s: key %q", in, key)
				}
				_, err := d.Int()
				return err
			})
			if valid := json.Valid([]byte(in)); valid != (err == nil) {
				t.Fatalf("%s: error %v, json.Valid %v", in, err, valid)
			}
		}
	}
}

// A type without DecodeJSON is read by encoding/json; its refusals say
// what the field must be, not which Go type the plugin declared.
func TestDecoderValueErrorsSayTheRule(t *testing.T) {
	t.Parallel()
	type earn struct {
		Points int64    `json:"points"`
		Tags   []string `json:"tags"`
	}
	for _, tc := range []struct {
		in, field, msg string
	}{
		{`{"points":1.5}`, "points", "points must be an integer, not number 1.5"},
		{`{"tags":"a"}`, "tags", "tags must be an array, not string"},
		{`"x"`, "", "expected an object, got string"},
	} {
		var v earn
		err := NewDecoder([]byte(tc.in)).Value(&v)
		var e *Error
		if !errors.As(err, &e) || e.Code != "invalid_type" || e.Field != tc.field || e.Message != tc.msg {
			t.Errorf("%s: %#v, want field %q message %q", tc.in, err, tc.field, tc.msg)
		}
		if e != nil && strings.Contains(e.Message, "Go struct") {
			t.Errorf("%s: the message names Go types: %s", tc.in, e.Message)
		}
	}
}
