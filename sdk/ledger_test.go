package sdk_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
)

// tally is a test ledger: a counter per entity with typed JSON state
// (encoding/json, no Decodable) and every kind of command.
type tally struct {
	Total sdk.Decimal `json:"total"`
	Count int         `json:"count"`
}

type addInput struct {
	By sdk.Decimal `json:"by"`
}

func newTally() *sdk.Ledger[tally] {
	return &sdk.Ledger[tally]{
		Name:        "tally",
		Version:     "1.0.0",
		EntityTypes: []string{"counter"},
		Emits:       []string{"added", "reset"},
		Commands: []sdk.Decider[tally]{
			sdk.Write(sdk.Command{Name: "add", Method: "POST", Path: "/add", Emits: []string{"added"}},
				func(s tally, c sdk.Cmd[addInput]) ([]sdk.NewFact, error) {
					switch {
					case c.Input.By.Sign() <= 0:
						return nil, sdk.Invalid("by", "not_positive", "by must be positive")
					case s.Count >= 3:
						return nil, sdk.Refuse("full", "the counter is full")
					}
					return []sdk.NewFact{{Type: "added", Data: c.Input, Timestamp: c.Now + 1}}, nil
				}),
			sdk.Read(sdk.Command{Name: "total", Method: "GET", Path: "/total"},
				func(s tally, c sdk.Cmd[struct{}]) (map[string]any, error) {
					return map[string]any{"total": s.Total, "entity": c.Entity.ID}, nil
				}),
			sdk.Write(sdk.Command{Name: "boom"}, func(tally, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				var m map[string]int
				m["x"] = 1 //nolint:staticcheck // SA5000: the nil map write is the panic under test
				return nil, nil
			}),
			sdk.Write(sdk.Command{Name: "stray"}, func(tally, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				return []sdk.NewFact{{Type: "undeclared"}}, nil
			}),
			sdk.Write(sdk.Command{Name: "plain_error"}, func(tally, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				return nil, errors.New("something is off")
			}),
		},
		Evolve: func(s tally, f sdk.Fact) tally {
			switch f.Type {
			case "added":
				var in addInput
				if f.Decode(&in) == nil {
					s.Total = s.Total.Add(in.By)
				}
				s.Count++
			case "reset":
				s = tally{}
			}
			return s
		},
	}
}

func decide(t *testing.T, p sdk.Plugin, msg string) (abi.Status, string) {
	t.Helper()
	out := sdk.Invoke(p, abi.ExportDecide, []byte(msg))
	if len(out) == 0 {
		t.Fatal("empty output")
	}
	if !json.Valid(out[1:]) {
		t.Fatalf("output is not JSON: %q", out)
	}
	return abi.Status(out[0]), string(out[1:])
}

func TestLedgerDecide(t *testing.T) {
	t.Parallel()
	l := newTally()
	entity := `"entity":{"id":"c1","type":"counter","tenant_id":"t1","version":3}`
	for _, tc := range []struct {
		name, msg string
		status    abi.Status
		want      string
	}{
		{"write", `{"command":"add","input":{"by":"2.50"},"now":100,` + entity + `,"state":{"total":1,"count":1}}`,
			0, `{"facts":[{"type":"added","data":{"by":2.5},"timestamp":101}]}`},
		{"input before command", `{"input":{"by":1},"command":"add","state":null}`,
			0, `{"facts":[{"type":"added","data":{"by":1},"timestamp":1}]}`},
		{"read", `{"command":"total",` + entity + `,"state":{"total":7.25,"count":2}}`,
			0, `{"result":{"entity":"c1","total":7.25}}`},
		{"refused", `{"command":"add","input":{"by":1},"state":{"count":3}}`,
			1, `{"code":"full","message":"the counter is full"}`},
		{"invalid field", `{"command":"add","input":{"by":-1}}`,
			2, `{"code":"not_positive","message":"by must be positive","field":"by"}`},
		{"undecodable input", `{"command":"add","input":{"by":"x"}}`,
			2, `{"code":"invalid_decimal","message":"not a decimal number"}`},
		{"input of the wrong type", `{"command":"add","input":[1]}`,
			2, `{"code":"invalid_type","message":"expected an object, got array"}`},
		{"bad state", `{"command":"add","input":{"by":1},"state":{"count":"many"}}`,
			2, `{"code":"invalid_state","message":"count must be an integer, not string","field":"state.count"}`},
		{"unknown command", `{"command":"nope"}`,
			3, `{"code":"unknown_command","message":"ledger tally has no command \"nope\""}`},
		{"append not supported", `{"command":"append","input":{"type":"added"}}`,
			1, `{"code":"append_not_supported","message":"ledger tally does not accept raw appends"}`},
		{"no command", `{"input":{}}`,
			2, `{"code":"missing_command","message":"the input names no command","field":"command"}`},
		{"wrong entity type", `{"command":"total","entity":{"type":"account"}}`,
			2, `{"code":"wrong_entity_type","message":"ledger tally does not serve entities of type \"account\"","field":"entity.type"}`},
		{"not an object", `[]`,
			2, `{"code":"invalid_json","message":"the input is not a JSON object"}`},
		{"truncated", `{"command":"add","input":{"by":1}`,
			2, `{"code":"invalid_json","message":"expected ',' or '}' in an object at offset 33"}`},
		{"trailing data", `{"command":"total"} x`,
			2, `{"code":"invalid_json","message":"unexpected data after the value at offset 20"}`},
		{"panic", `{"command":"boom"}`,
			5, `{"code":"panic","message":"assignment to entry in nil map"}`},
		{"undeclared fact type", `{"command":"stray"}`,
			5, `{"code":"panic","message":"sdk: command stray recorded a fact of type \"undeclared\", which it does not declare in Emits"}`},
		{"plain error", `{"command":"plain_error"}`,
			1, `{"code":"refused","message":"something is off"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, out := decide(t, l, tc.msg)
			if status != tc.status || out != tc.want {
				t.Fatalf("got  %d %s\nwant %d %s", status, out, tc.status, tc.want)
			}
		})
	}
}

func TestLedgerEvolve(t *testing.T) {
	t.Parallel()
	l := newTally()
	for _, tc := range []struct {
		msg    string
		status abi.Status
		want   string
	}{
		{`{"state":null,"fact":{"id":"f1","type":"added","seq":1,"timestamp":5,"data":{"by":0.1}}}`, 0, `{"total":0.1,"count":1}`},
		{`{"fact":{"type":"added","data":{"by":0.2}},"state":{"total":0.1,"count":1}}`, 0, `{"total":0.3,"count":2}`},
		{`{"fact":{"type":"reset"},"state":{"total":0.1,"count":1}}`, 0, `{"total":0,"count":0}`},
		{`{"fact":{"type":"added","data":{"by":"x"}},"state":{"count":1}}`, 0, `{"total":0,"count":2}`},
		{`{"fact":{"type":"added"},"state":"oops"}`, 2, `{"code":"invalid_state","message":"expected an object, got string","field":"state"}`},
		{`{"fact":{"type":1}}`, 2, `{"code":"invalid_type","message":"expected string, got a number","field":"fact.type"}`},
	} {
		out := sdk.Invoke(l, abi.ExportEvolve, []byte(tc.msg))
		if status := abi.Status(out[0]); status != tc.status || string(out[1:]) != tc.want {
			t.Errorf("%s:\ngot  %d %s\nwant %d %s", tc.msg, status, out[1:], tc.status, tc.want)
		}
	}
	out := sdk.Invoke(l, abi.ExportHandle, []byte(`{}`))
	if abi.Status(out[0]) != abi.StatusUnsupported {
		t.Fatalf("handle on a ledger: %q", out)
	}
}

func TestLedgerDescribe(t *testing.T) {
	t.Parallel()
	out := sdk.Invoke(newTally(), abi.ExportDescribe, nil)
	var d abi.Description
	if out[0] != 0 || json.Unmarshal(out[1:], &d) != nil {
		t.Fatalf("describe: %q", out)
	}
	if d.ABI != abi.Version || d.Kind != abi.KindLedger || d.Name != "tally" || len(d.Commands) != 5 ||
		!d.Commands[1].ReadOnly || d.Commands[0].Path != "/add" || d.Commands[0].Method != "POST" {
		t.Fatalf("describe = %+v", d)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	ok := func(tally, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) { return nil, nil }
	evolve := func(s tally, _ sdk.Fact) tally { return s }
	base := func() *sdk.Ledger[tally] {
		return &sdk.Ledger[tally]{Name: "x", Version: "1.0.0", EntityTypes: []string{"t"}, Emits: []string{"e"}, Evolve: evolve}
	}
	for _, tc := range []struct {
		want   string
		change func(l *sdk.Ledger[tally])
	}{
		{"", func(*sdk.Ledger[tally]) {}},
		{`name "Bad Name"`, func(l *sdk.Ledger[tally]) { l.Name = "Bad Name" }},
		{"Version is empty", func(l *sdk.Ledger[tally]) { l.Version = "" }},
		{"EntityTypes is empty", func(l *sdk.Ledger[tally]) { l.EntityTypes = nil }},
		{"Evolve is nil", func(l *sdk.Ledger[tally]) { l.Evolve = nil }},
		{"declared twice", func(l *sdk.Ledger[tally]) {
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a"}, ok), sdk.Write(sdk.Command{Name: "a"}, ok))
		}},
		{"set both Method and Path", func(l *sdk.Ledger[tally]) {
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a", Path: "/a"}, ok))
		}},
		{"must start with /", func(l *sdk.Ledger[tally]) {
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a", Method: "POST", Path: "a"}, ok))
		}},
		{`method "FETCH"`, func(l *sdk.Ledger[tally]) {
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a", Method: "FETCH", Path: "/a"}, ok))
		}},
		{"read-only but declares Emits", func(l *sdk.Ledger[tally]) {
			l.Commands = append(l.Commands, sdk.Read(sdk.Command{Name: "a", Emits: []string{"e"}}, func(tally, sdk.Cmd[struct{}]) (int, error) { return 0, nil }))
		}},
		{`emits "other"`, func(l *sdk.Ledger[tally]) {
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a", Emits: []string{"other"}}, ok))
		}},
		{"", func(l *sdk.Ledger[tally]) {
			l.Emits = []string{sdk.AnyFactType}
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a", Emits: []string{"other"}}, ok),
				sdk.Write(sdk.Command{Name: "b", Emits: []string{sdk.AnyFactType}}, ok))
		}},
		{"Emits lists AnyFactType beside other fact types", func(l *sdk.Ledger[tally]) { l.Emits = []string{"e", sdk.AnyFactType} }},
		{"command a Emits lists AnyFactType beside", func(l *sdk.Ledger[tally]) {
			l.Emits = []string{sdk.AnyFactType}
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a", Emits: []string{sdk.AnyFactType, "e"}}, ok))
		}},
		{`emits "*", which is not in the ledger's Emits`, func(l *sdk.Ledger[tally]) {
			l.Commands = append(l.Commands, sdk.Write(sdk.Command{Name: "a", Emits: []string{sdk.AnyFactType}}, ok))
		}},
	} {
		l := base()
		tc.change(l)
		err := sdk.Check(l)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check = %v, want an error containing %q", err, tc.want)
		}
	}
}

func TestSubscription(t *testing.T) {
	t.Parallel()
	s := &sdk.Subscription{
		Name: "echo", Version: "1.0.0", Emits: []string{"echoed"},
		Handlers: []sdk.Handler{
			{Name: "echo", Handle: func(f sdk.Fact) ([]sdk.Action, error) {
				if f.Subtype == "refuse" {
					return nil, sdk.Refuse("no", "not this one")
				}
				if f.Subtype == "stray" {
					return []sdk.Action{{EntityID: "x", Type: "other"}}, nil
				}
				return []sdk.Action{{EntityID: f.EntityID, Type: "echoed", Subtype: f.Type, Data: json.RawMessage(f.Data)}}, nil
			}},
		},
	}
	if err := sdk.Check(s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		msg  string
		want string
	}{
		{`{"handler":"echo","fact":{"id":"f1","type":"call","entity_id":"e1","data":{"a":[1]}}}`,
			"\x00" + `{"actions":[{"kind":"append","entity_id":"e1","type":"echoed","subtype":"call","data":{"a":[1]}}]}`},
		{`{"handler":"echo","fact":{"subtype":"refuse"}}`, "\x01" + `{"code":"no","message":"not this one"}`},
		{`{"handler":"echo","fact":{"subtype":"stray"}}`, "\x05" + `{"code":"panic","message":"sdk: handler echo appends a fact of type \"other\", which the subscription does not declare in Emits"}`},
		{`{"handler":"nope","fact":{}}`, "\x03" + `{"code":"unknown_command","message":"subscription echo has no handler \"nope\""}`},
		{`{"handler":"echo","fact":"x"}`, "\x02" + `{"code":"invalid_type","message":"expected object, got a string","field":"fact"}`},
	} {
		if got := string(sdk.Invoke(s, abi.ExportHandle, []byte(tc.msg))); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.msg, got, tc.want)
		}
	}
	if out := sdk.Invoke(s, abi.ExportDecide, []byte(`{}`)); out[0] != byte(abi.StatusUnsupported) {
		t.Errorf("decide on a subscription: %q", out)
	}
	var d abi.Description
	if err := json.Unmarshal(sdk.Invoke(s, abi.ExportDescribe, nil)[1:], &d); err != nil || d.Kind != abi.KindSubscription || d.Handlers[0] != "echo" {
		t.Errorf("describe = %+v, %v", d, err)
	}
}

func TestInvokeUnknownExport(t *testing.T) {
	t.Parallel()
	if out := sdk.Invoke(newTally(), "factline_alloc", nil); out[0] != byte(abi.StatusUnsupported) {
		t.Fatalf("got %q", out)
	}
	if out := sdk.Invoke(nil, abi.ExportDecide, nil); out[0] != byte(abi.StatusUnsupported) {
		t.Fatalf("got %q", out)
	}
}

// FuzzDecide feeds arbitrary bytes to decide, evolve and handle: every
// answer is a status byte and JSON, never a panic out of the SDK.
func FuzzDecide(f *testing.F) {
	f.Add([]byte(`{"command":"add","input":{"by":1},"state":{"total":1,"count":1}}`))
	f.Add([]byte(`{"fact":{"type":"added","data":{"by":0.1}},"state":null}`))
	f.Add([]byte(`{"handler":"x","fact":{"type":"a"}}`))
	f.Add([]byte(`{"command":"total","entity":{"id":"\u0000","version":1e3}}`))
	l := newTally()
	l.Commands = l.Commands[:2] // add and total: no deliberate panics
	s := &sdk.Subscription{Name: "s", Version: "1", Handlers: []sdk.Handler{{Name: "x", Handle: func(f sdk.Fact) ([]sdk.Action, error) {
		if f.Type == "" {
			return nil, nil
		}
		return []sdk.Action{{EntityID: "e", Type: f.Type, Data: json.RawMessage(f.Data)}}, nil
	}}}}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, call := range []struct {
			p sdk.Plugin
			e string
		}{{l, abi.ExportDecide}, {l, abi.ExportEvolve}, {s, abi.ExportHandle}} {
			out := sdk.Invoke(call.p, call.e, in)
			// A panic (status 5) would be a bug of the SDK's decoding.
			if len(out) == 0 || out[0] >= byte(abi.StatusPanic) || !json.Valid(out[1:]) {
				t.Fatalf("%s(%q) = %q", call.e, in, out)
			}
		}
	})
}
