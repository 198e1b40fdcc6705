package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// stdFact decodes with encoding/json for comparison.
func stdFact(b []byte) (Fact, error) {
	var w map[string]json.RawMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return Fact{}, err
	}
	if w == nil {
		return Fact{}, errors.New("not an object")
	}
	var f Fact
	str := func(k string, dst *string) error {
		raw, ok := w[k]
		if !ok || string(raw) == "null" {
			return nil
		}
		if raw[0] != '"' {
			return errors.New(k + " not a string")
		}
		return json.Unmarshal(raw, dst)
	}
	for k, dst := range map[string]*string{"id": &f.ID, "type": &f.Type, "subtype": &f.Subtype} {
		if err := str(k, dst); err != nil {
			return Fact{}, err
		}
	}
	if raw, ok := w["timestamp"]; ok && string(raw) != "null" {
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return Fact{}, errors.New("timestamp not a number")
		}
		ts, err := json.Number(raw).Int64()
		if err != nil {
			return Fact{}, err
		}
		f.Timestamp = ts
	}
	if raw, ok := w["data"]; ok && string(raw) != "null" {
		if raw[0] != '{' {
			return Fact{}, errors.New("data not an object")
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&f.Data); err != nil {
			return Fact{}, err
		}
	}
	return f, nil
}

func TestFactFromJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want Fact
		err  bool
	}{
		{"full", `{"id":"fct_1","type":"deposit","subtype":"manual","timestamp":1704067200000,"entity_id":"x",
			"data":{"amount":0.1,"big":123456789012345678901234567890.5,"n":{"a":[1,"x",true,null,{"b":-2e3}]},"s":"\u00e9\n\"\ud83d\ude00"}}`,
			Fact{ID: "fct_1", Type: "deposit", Subtype: "manual", Timestamp: 1704067200000, Data: map[string]any{
				"amount": num("0.1"), "big": num("123456789012345678901234567890.5"),
				"n": map[string]any{"a": []any{num("1"), "x", true, nil, map[string]any{"b": num("-2e3")}}},
				"s": "é\n\"😀"}}, false},
		{"nulls", `{"id":"a","type":"t","subtype":null,"timestamp":null,"data":null}`, Fact{ID: "a", Type: "t"}, false},
		{"whitespace and order", " {\n\"data\" : { } ,\"timestamp\": -5 , \"id\":\"z\"} \n", Fact{ID: "z", Timestamp: -5, Data: map[string]any{}}, false},
		{"invalid utf8 and lone surrogate", "{\"id\":\"a\xffb\",\"data\":{\"s\":\"\\ud800x\"}}", Fact{ID: "a\uFFFDb", Data: map[string]any{"s": "\uFFFDx"}}, false},
		{"fractional timestamp", `{"timestamp":1.5}`, Fact{}, true},
		{"string timestamp", `{"timestamp":"1"}`, Fact{}, true},
		{"data not an object", `{"data":[1]}`, Fact{}, true},
		{"id not a string", `{"id":1}`, Fact{}, true},
		{"trailing garbage", `{"id":"a"} x`, Fact{}, true},
		{"truncated", `{"id":"a","data":{"x":`, Fact{}, true},
		{"leading zero", `{"data":{"x":01}}`, Fact{}, true},
		{"bad escape", `{"id":"\q"}`, Fact{}, true},
		{"control char", "{\"id\":\"a\x01\"}", Fact{}, true},
		{"not an object", `[1]`, Fact{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FactFromJSON([]byte(tc.in))
			if tc.err {
				if err == nil || !errors.Is(err, ErrInvalidFact) {
					t.Fatalf("got %+v, %v; want an ErrInvalidFact", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
			std, err := stdFact([]byte(tc.in))
			if err != nil || !reflect.DeepEqual(got, std) {
				t.Fatalf("encoding/json disagrees: %#v %v", std, err)
			}
		})
	}
	// Round trip through MarshalJSON.
	f := Fact{ID: "a", Type: "t", Timestamp: 5, Data: map[string]any{"x": num("1.50")}}
	b, _ := json.Marshal(f)
	var g Fact
	if err := json.Unmarshal(b, &g); err != nil || !reflect.DeepEqual(f, g) {
		t.Fatalf("round trip: %s -> %#v %v", b, g, err)
	}
}

func TestDecodeData(t *testing.T) {
	t.Parallel()
	m, err := DecodeData([]byte(` {"a": 1.0} `))
	if err != nil || !reflect.DeepEqual(m, map[string]any{"a": num("1.0")}) {
		t.Fatalf("%v %v", m, err)
	}
	for _, in := range []string{"", "null", "  "} {
		if m, err := DecodeData([]byte(in)); m != nil || err != nil {
			t.Fatalf("%q: %v %v", in, m, err)
		}
	}
	if _, err := DecodeData([]byte(`[1]`)); err == nil {
		t.Fatal("array accepted")
	}
}

// FuzzFactFromJSON checks the decoder against encoding/json: both accept
// the same documents and decode them alike.
func FuzzFactFromJSON(f *testing.F) {
	f.Add([]byte(`{"id":"fct_1","type":"deposit","timestamp":1704067200000,"data":{"amount":0.1,"n":{"a":[1,"x",true,null]}}}`))
	f.Add([]byte(`{"id":"\ud83d\ude00\u00e9","data":{"s":"\ud800"}}`))
	f.Add([]byte(`{"timestamp":-0,"data":{"":{},"x":[]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := FactFromJSON(b)
		want, stdErr := stdFact(b)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("FactFromJSON err %v, encoding/json err %v", err, stdErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("got %#v\nwant %#v", got, want)
		}
	})
}
