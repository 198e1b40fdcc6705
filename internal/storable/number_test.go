package storable_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"

	"github.com/factline/factline/internal/storable"
)

func TestPlainNumbersWritesNumbersOut(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1e2}`, `{"a":100}`},
		{`{"a":1E+2,"b":-1.5e1,"c":1.50e1}`, `{"a":100,"b":-15,"c":15.0}`},
		{`{"a":1e-2,"b":-12e-5,"c":123e-2}`, `{"a":0.01,"b":-0.00012,"c":1.23}`},
		{`{"a":-0,"b":-0.00,"c":0.0e5,"d":-0e-2}`, `{"a":0,"b":0.00,"c":0,"d":0.00}`},
		{`[1e0, 10e-1, 0.1e1]`, `[1, 1.0, 1]`},
		// Strings are left alone, escapes included; plain numbers too.
		{`{"1e2":"1e2 \"-0\" \\","n":[-1,0.5,12345678901234567890]}`, `{"1e2":"1e2 \"-0\" \\","n":[-1,0.5,12345678901234567890]}`},
		{`-0`, `0`},
		{`5e-3`, `0.005`},
	} {
		if got := string(storable.PlainNumbers([]byte(tc.in))); got != tc.want {
			t.Errorf("PlainNumbers(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	doc := []byte(`{"a":[1,2.50,"x"]}`)
	if got := storable.PlainNumbers(doc); &got[0] != &doc[0] {
		t.Errorf("a document without a number to rewrite was copied")
	}
}

// FuzzPlainNumbers: the output of a document the stores accept is valid
// JSON, holds the same values, and has nothing left to rewrite.
func FuzzPlainNumbers(f *testing.F) {
	for _, s := range []string{`{"a":1e2}`, `[-0,1.5E-3,"e",{"b":[2e+1]}]`, `{"s":"\"1e2"}`, `7`, `0.0e9`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) || len(storable.Inspect(doc, "").Bad) > 0 {
			return
		}
		out := storable.PlainNumbers(doc)
		if !json.Valid(out) {
			t.Fatalf("PlainNumbers(%s) = %s, not JSON", doc, out)
		}
		if again := storable.PlainNumbers(out); !bytes.Equal(again, out) {
			t.Fatalf("PlainNumbers(%s) = %s, and again %s", doc, out, again)
		}
		if a, b := values(t, doc), values(t, out); a != b {
			t.Fatalf("PlainNumbers(%s) = %s changed the values:\n%s\n%s", doc, out, a, b)
		}
	})
}

// values renders a document with every number as an exact rational.
func values(t *testing.T, doc []byte) string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			r, ok := new(big.Rat).SetString(string(x))
			if !ok {
				t.Fatalf("number %s", x)
			}
			return "n:" + r.RatString()
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return fmt.Sprint(walk(v))
}
