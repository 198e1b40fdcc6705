package projection

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// respHash encodes field/value pairs as a reply to HGETALL: a RESP3 map,
// or with resp2 a flat array.
func respHash(resp2 bool, pairs ...string) []byte {
	var b strings.Builder
	if resp2 {
		fmt.Fprintf(&b, "*%d\r\n", len(pairs))
	} else {
		fmt.Fprintf(&b, "%%%d\r\n", len(pairs)/2)
	}
	for _, p := range pairs {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(p), p)
	}
	return []byte(b.String())
}

func decodeRaw(s *schema, raw []byte) (*cell, error) {
	c := newCell(s)
	d := hashDecoder{s: s, names: fieldNames(s)}
	return c, decodeRawHash(&d, c, raw)
}

// TestDecodeRawHash decodes raw HGETALL replies in both protocols and
// compares with decoding the same fields as strings.
func TestDecodeRawHash(t *testing.T) {
	t.Parallel()
	s := compile(mustConfig(t, cfgYAML("minute", "", allAggs)))
	for _, tc := range []struct {
		name  string
		pairs []string
		want  string
	}{
		{"empty", nil,
			`{"count":0,"payment_amount_avg":null,"payment_amount_max":null,"payment_amount_min":null,"payment_amount_sum":0,"user_distinct":0}`},
		{"small", []string{"n", "4", "c|payment_amount", "4", "s|payment_amount|2|0", "700", "lo|payment_amount", "0.25", "hi|payment_amount", "3.25"},
			`{"count":4,"payment_amount_avg":1.75,"payment_amount_max":3.25,"payment_amount_min":0.25,"payment_amount_sum":7,"user_distinct":0}`},
		{"limbs and scales", []string{
			"s|payment_amount|0|0", "-5", "s|payment_amount|2|1", "3", "s|payment_amount|2|0", "999999999",
			"s|payment_amount|2|2", "1", "s|payment_amount|20|0", "7", "s|payment_amount|19|3", "1",
			"c|payment_amount", "3", "n", "5",
			"lo|payment_amount", "-123456789012345678901234567890.5", "hi|payment_amount", "99999999999999999999"},
			// -5 + 1000000003999999999e-2 + 1e27e-19 + 7e-20, over 3 values
			`{"count":5,"payment_amount_avg":3333333379999998.33,"payment_amount_max":99999999999999999999,` +
				`"payment_amount_min":-123456789012345678901234567890.5,"payment_amount_sum":10000000139999994.99000000000000000007,"user_distinct":0}`},
		{"fields of other configurations are ignored", []string{"n", "2", "c|other", "9", "s|other|2|0", "5", "lo|other", "x", "zz", "1", "s|bad", "1"},
			`{"count":2,"payment_amount_avg":null,"payment_amount_max":null,"payment_amount_min":null,"payment_amount_sum":0,"user_distinct":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := cellFromFields(s, tc.pairs, fieldNames(s))
			if err != nil {
				t.Fatal(err)
			}
			if got := js(want.render(s)); got != tc.want {
				t.Errorf("from strings:\n got %s\nwant %s", got, tc.want)
			}
			for _, resp2 := range []bool{false, true} {
				c, err := decodeRaw(s, respHash(resp2, tc.pairs...))
				if err != nil {
					t.Fatalf("resp2=%v: %v", resp2, err)
				}
				if got := js(c.render(s)); got != tc.want {
					t.Errorf("resp2=%v:\n got %s\nwant %s", resp2, got, tc.want)
				}
			}
		})
	}
}

func TestDecodeRawHashErrors(t *testing.T) {
	t.Parallel()
	s := compile(mustConfig(t, cfgYAML("minute", "", allAggs)))
	for _, tc := range []struct {
		raw, want string
	}{
		{"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "WRONGTYPE"},
		{"!9\r\nERR blobs\r\n", "ERR blobs"},
		{"*3\r\n$1\r\nn\r\n$1\r\n1\r\n$1\r\nx\r\n", "unexpected reply"},
		{":1\r\n", "unexpected reply"},
		{"%1\r\n$1\r\nn\r\n$2\r\n1\r\n", "malformed"},
		{"%1\r\n$1\r\nn\r\n", "malformed"},
		{"%1\r\n$1\r\nn", "malformed"},
		{"%1", "malformed"},
		{"", "malformed"},
		{string(respHash(false, "s|payment_amount|2|0", "1.5")), "corrupt bucket sum"},
		{string(respHash(false, "lo|payment_amount", "abc")), "corrupt bucket value"},
		{string(respHash(true, "s|payment_amount|25|0", "x")), "corrupt bucket sum"},
	} {
		_, err := decodeRaw(s, []byte(tc.raw))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.raw, err, tc.want)
		}
	}
}

func TestAtoi64(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"+7", 7, true}, {"123", 123, true}, {"-999999999", -999999999, true},
		{"999999999999999999", 999999999999999999, true}, {"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true}, {"9223372036854775808", 9223372036854775807, false},
		{"", 0, false}, {"-", 0, false}, {"1.5", 0, false}, {" 1", 0, false}, {"1x", 0, false}, {"99999999999999999999", 9223372036854775807, false},
	} {
		n, ok := atoi64(tc.in)
		if ok != tc.ok || (ok && n != tc.n) {
			t.Errorf("atoi64(%q) = %d %v, want %d %v", tc.in, n, ok, tc.n, tc.ok)
		}
		if nb, okb := atoi64([]byte(tc.in)); nb != n || okb != ok {
			t.Errorf("atoi64([]byte(%q)) = %d %v, want %d %v", tc.in, nb, okb, n, ok)
		}
	}
}

// FuzzDecodeRawHash feeds arbitrary replies to the decoder: it must not
// panic, and a reply it accepts must decode as its fields do as strings.
func FuzzDecodeRawHash(f *testing.F) {
	s := compile(mustConfig(f, cfgYAML("minute", "", allAggs)))
	f.Add(respHash(false, "n", "4", "c|payment_amount", "4", "s|payment_amount|2|0", "700"))
	f.Add(respHash(true, "n", "1", "lo|payment_amount", "-1.5", "hi|payment_amount", "2", "s|payment_amount|3|1", "12"))
	f.Add([]byte("-ERR x\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := decodeRaw(s, raw)
		if err != nil {
			return
		}
		// Re-read the pairs the decoder accepted and decode them as strings.
		_, n, p, _ := respLine(raw, 0)
		if raw[0] == '*' {
			n /= 2
		}
		var pairs []string
		for i := 0; i < 2*n; i++ {
			var b []byte
			b, p, _ = respString(raw, p)
			pairs = append(pairs, string(b))
		}
		want, err := cellFromFields(s, pairs, fieldNames(s))
		if err != nil {
			t.Fatalf("raw accepted, strings refused: %v", err)
		}
		if js(c.render(s)) != js(want.render(s)) {
			t.Fatalf("raw %s, strings %s", js(c.render(s)), js(want.render(s)))
		}
	})
}

// TestRendererMatchesRender renders many cells with a renderer and one by
// one.
func TestRendererMatchesRender(t *testing.T) {
	t.Parallel()
	s := compile(mustConfig(t, cfgYAML("minute", "", allAggs)))
	r := rand.New(rand.NewPCG(3, 4))
	cells := make([]*cell, 3*renderBatch+5)
	for i := range cells {
		c := newCell(s)
		if i%7 != 0 {
			for k := r.IntN(4); k >= 0; k-- {
				c.add(s, s.values(&Fact{Data: map[string]any{
					"payment": map[string]any{"amount": randNumber(r).jsonNumber()},
					"user":    fmt.Sprint("u", r.IntN(10))}}, nil))
			}
		}
		cells[i] = c
	}
	rd := renderer{s: s}
	outs := make([]map[string]any, len(cells))
	for i, c := range cells {
		outs[i] = rd.render(c)
	}
	rd.flush()
	for i, c := range cells {
		if got, want := js(outs[i]), js(c.render(s)); got != want {
			t.Errorf("cell %d: renderer %s, render %s", i, got, want)
		}
	}
}
