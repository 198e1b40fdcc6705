package pluginrt

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/factline/factline/sdk/abi"
)

// roundTrip encodes in with the host's encoder and decodes it with
// encoding/json.
func roundTrip[T any](t *testing.T, enc func(*bytes.Buffer, *T) error, in T) (T, string, error) {
	t.Helper()
	var b bytes.Buffer
	var out T
	if err := enc(&b, &in); err != nil {
		return out, "", err
	}
	if !json.Valid(b.Bytes()) {
		t.Fatalf("invalid JSON: %s", b.Bytes())
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatalf("decode %s: %v", b.Bytes(), err)
	}
	return out, b.String(), nil
}

func TestEncodeDecideInput(t *testing.T) {
	t.Parallel()
	in := abi.DecideInput{
		Command: "deposit",
		Entity:  abi.EntityRef{ID: "acct-\"1\"", Type: "account", TenantID: "t\\1", Version: 7},
		State:   json.RawMessage("{ \"balance\" : \"1.5\" }"),
		Input:   json.RawMessage(`{"amount":"0.1","note":"<b>&</b>"}`),
		Now:     1764000000000,
	}
	out, s, err := roundTrip(t, appendDecideInput, in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"command":"deposit","input":{"amount":"0.1","note":"<b>&</b>"},"now":1764000000000,` +
		`"entity":{"id":"acct-\"1\"","type":"account","tenant_id":"t\\1","version":7},"state":{"balance":"1.5"}}`
	if s != want {
		t.Errorf("encoded\n%s\nwant\n%s", s, want)
	}
	in.State = json.RawMessage(`{"balance":"1.5"}`)
	if !reflect.DeepEqual(out, in) {
		t.Errorf("decoded %+v", out)
	}

	// Empty raw values are null; invalid ones are refused.
	out, s, err = roundTrip(t, appendDecideInput, abi.DecideInput{Command: "x"})
	if err != nil || !strings.Contains(s, `"input":null`) || !strings.Contains(s, `"state":null`) || out.Command != "x" {
		t.Errorf("empty raw: %s, %v", s, err)
	}
	if _, _, err := roundTrip(t, appendDecideInput, abi.DecideInput{State: json.RawMessage(`{"a":`)}); err == nil ||
		!strings.Contains(err.Error(), "state is not valid JSON") {
		t.Errorf("invalid state: %v", err)
	}
}

func TestEncodeFacts(t *testing.T) {
	t.Parallel()
	full := abi.Fact{
		ID: "fct_1", Type: "outcome", Subtype: "no_answer", TenantID: "t1", EntityID: "line-1", EntityType: "asset",
		Seq: 3, Position: 912, SourceID: "fct_0", Timestamp: 1764000000000, Data: json.RawMessage(`{"x":[1,2]}`),
	}
	for _, f := range []abi.Fact{full, {ID: "f", Type: "t"}} {
		ev, _, err := roundTrip(t, appendEvolveInput, abi.EvolveInput{State: json.RawMessage(`null`), Fact: f})
		if err != nil || !reflect.DeepEqual(ev.Fact, f) || string(ev.State) != "null" {
			t.Errorf("evolve input: %+v, %v", ev, err)
		}
		hi, _, err := roundTrip(t, appendHandleInput, abi.HandleInput{Handler: "h", Fact: f})
		if err != nil || !reflect.DeepEqual(hi.Fact, f) || hi.Handler != "h" {
			t.Errorf("handle input: %+v, %v", hi, err)
		}
	}
	// omitempty as in abi.Fact's tags
	var b bytes.Buffer
	if err := appendFact(&b, &abi.Fact{ID: "f", Type: "t"}); err != nil || b.String() != `{"id":"f","type":"t","timestamp":0}` {
		t.Errorf("minimal fact = %s, %v", b.String(), err)
	}
}

// TestEncodeStringsLikeEncodingJSON compares appendString with
// encoding/json (HTML escaping off) on awkward strings.
func TestEncodeStringsLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\n\r\t", "é ü 日本", "bad\xff\xfeutf8",
		"line\u2028sep\u2029", "<>&", "\U0001F600"} {
		checkString(t, s)
	}
}

func checkString(t *testing.T, s string) {
	t.Helper()
	var b bytes.Buffer
	appendString(&b, s)
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	if b.String() != strings.TrimSuffix(want.String(), "\n") {
		t.Errorf("appendString(%q) = %s, encoding/json %s", s, b.String(), want.String())
	}
}

func FuzzEncodeDecideInput(f *testing.F) {
	f.Add("deposit", "acct-1", `{"amount":"1"}`, `null`, int64(7))
	f.Add("x\x00\"", "\xff", ` [ 1 , {"a" : "b"} ] `, `{"a":`, int64(-1))
	f.Fuzz(func(t *testing.T, command, id, input, state string, n int64) {
		checkString(t, command)
		in := abi.DecideInput{Command: command, Entity: abi.EntityRef{ID: id, Version: n},
			Input: json.RawMessage(input), State: json.RawMessage(state), Now: n}
		var b bytes.Buffer
		err := appendDecideInput(&b, &in)
		validRaw := func(s string) bool { return s == "" || json.Valid([]byte(s)) }
		if (err == nil) != (validRaw(input) && validRaw(state)) {
			t.Fatalf("err = %v for input %q state %q", err, input, state)
		}
		if err != nil {
			return
		}
		var out abi.DecideInput
		if err := json.Unmarshal(b.Bytes(), &out); err != nil {
			t.Fatalf("decode %q: %v", b.Bytes(), err)
		}
		if out.Command != viaJSON(command) || out.Entity.ID != viaJSON(id) || out.Now != n || out.Entity.Version != n {
			t.Fatalf("round trip %+v -> %+v", in, out)
		}
	})
}

// viaJSON is s after a round trip through encoding/json (invalid UTF-8
// becomes U+FFFD, byte by byte).
func viaJSON(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// FuzzParseOutput feeds arbitrary guest outputs to the framing parser: it
// must classify every one without panicking.
func FuzzParseOutput(f *testing.F) {
	f.Add([]byte("\x00{\"facts\":[]}"))
	f.Add([]byte("\x01{\"code\":\"c\",\"message\":\"m\",\"field\":\"f\"}"))
	f.Add([]byte("\x05{"))
	f.Add([]byte("\x09{}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, out []byte) {
		var res abi.DecideResult
		cerr, err := parseOutput(out, func(b []byte) error { return json.Unmarshal(b, &res) })
		switch {
		case len(out) == 0:
			if err == nil {
				t.Fatal("empty output accepted")
			}
		case out[0] > byte(abi.StatusPanic):
			if err == nil {
				t.Fatalf("status %d accepted", out[0])
			}
		case out[0] == 0:
			if cerr != nil || (err == nil) != json.Valid(out[1:]) && err == nil {
				t.Fatalf("status 0: %v %v", cerr, err)
			}
		default:
			if (cerr == nil) == (err == nil) {
				t.Fatalf("status %d: %v %v", out[0], cerr, err)
			}
			if cerr != nil && cerr.Status != abi.Status(out[0]) {
				t.Fatalf("status %d reported as %d", out[0], cerr.Status)
			}
		}
	})
}

func TestInvalidInputRunsNoGuestCode(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1})
	p := load(t, h, "ledger")
	in := decideInput("deposit", `{"amount":`)
	if _, err := p.Decide(t.Context(), in); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Decide with invalid input: %v", err)
	}
	if _, err := p.Evolve(t.Context(), abi.EvolveInput{Fact: abi.Fact{ID: "f", Type: "deposit", Data: json.RawMessage(`nope`)}}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Evolve with invalid data: %v", err)
	}
	if s := p.Stats(); s.Calls != 0 {
		t.Errorf("stats = %+v", s)
	}
}
