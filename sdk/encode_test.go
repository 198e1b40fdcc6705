package sdk

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestEncoder(t *testing.T) {
	t.Parallel()
	var e Encoder
	e.BeginObject()
	e.Key("a")
	e.BeginArray()
	e.Int(-3)
	e.Decimal(MustDecimal("0.25"))
	e.String("q\"\\\n\t\x01é")
	e.Bool(true)
	e.Null()
	e.EndArray()
	e.Key("raw")
	e.Raw([]byte(`{"x":1}`))
	e.Key("empty")
	e.Raw(nil)
	e.Key("v")
	e.Value(map[string]int{"k": 1})
	e.Key("enc")
	e.Value(testEnc{})
	e.Key("long key with \"quote\"")
	e.String("a string longer than sixteen bytes")
	e.EndObject()
	want := `{"a":[-3,0.25,"q\"\\\n\t\u0001é",true,null],"raw":{"x":1},"empty":null,"v":{"k":1},"enc":{"enc":true},"long key with \"quote\"":"a string longer than sixteen bytes"}`
	if got := string(e.Bytes()); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !json.Valid(e.Bytes()) || e.Err() != nil {
		t.Fatal("invalid JSON or error")
	}
	e.Reset()
	e.Value(func() {})
	if e.Err() == nil || string(e.Bytes()) != "null" {
		t.Fatalf("unencodable value: %s, %v", e.Bytes(), e.Err())
	}
}

type testEnc struct{}

func (testEnc) EncodeJSON(e *Encoder) {
	e.BeginObject()
	e.Key("enc")
	e.Bool(true)
	e.EndObject()
}

// FuzzAppendString checks that strings encode as encoding/json decodes
// them back.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "abc", "1234567", "12345678", "with \"quotes\" and \\", "\x00\x1f\x7f", "é😀", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", s, b, err)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("appendString(%q) decodes as %q", s, got)
		}
	})
}
