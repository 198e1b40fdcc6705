package sdk_test

import (
	"encoding/json"
	"fmt"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
)

// Wallet is the state of the example ledger. Plain structs work with
// encoding/json; implement sdk.Decodable and sdk.Encodable to go faster.
type Wallet struct {
	Balance sdk.Decimal `json:"balance"`
}

// Amount is the input of the example commands and the data of its facts.
type Amount struct {
	Amount sdk.Decimal `json:"amount"`
}

// wallet is a ledger for entity type "wallet": POST /top_up records a
// topped_up fact, GET /balance answers the balance.
var wallet = &sdk.Ledger[Wallet]{
	Name:        "wallet",
	Version:     "1.0.0",
	EntityTypes: []string{"wallet"},
	Emits:       []string{"topped_up", "spent"},
	Commands: []sdk.Decider[Wallet]{
		sdk.Write(sdk.Command{Name: "top_up", Method: "POST", Path: "/top_up", Emits: []string{"topped_up"}}, topUp),
		sdk.Write(sdk.Command{Name: "spend", Method: "POST", Path: "/spend", Emits: []string{"spent"}}, spend),
		sdk.Read(sdk.Command{Name: "balance", Method: "GET", Path: "/balance"}, balance),
	},
	Evolve: func(w Wallet, f sdk.Fact) Wallet {
		var a Amount
		if f.Decode(&a) != nil {
			return w
		}
		switch f.Type {
		case "topped_up":
			w.Balance = w.Balance.Add(a.Amount)
		case "spent":
			w.Balance = w.Balance.Sub(a.Amount)
		}
		return w
	},
}

func topUp(_ Wallet, cmd sdk.Cmd[Amount]) ([]sdk.NewFact, error) {
	if cmd.Input.Amount.Sign() <= 0 {
		return nil, sdk.Invalid("amount", "not_positive", "amount must be positive")
	}
	return []sdk.NewFact{{Type: "topped_up", Data: cmd.Input}}, nil
}

func spend(w Wallet, cmd sdk.Cmd[Amount]) ([]sdk.NewFact, error) {
	if w.Balance.Cmp(cmd.Input.Amount) < 0 {
		return nil, sdk.Refuse("insufficient_funds", "the wallet holds "+w.Balance.String())
	}
	return []sdk.NewFact{{Type: "spent", Data: cmd.Input}}, nil
}

func balance(w Wallet, _ sdk.Cmd[struct{}]) (Wallet, error) { return w, nil }

func call(p sdk.Plugin, export, input string) {
	out := sdk.Invoke(p, export, []byte(input))
	fmt.Printf("status %d: %s\n", out[0], out[1:])
}

// A ledger declares its commands and its evolve function; Invoke runs the
// same dispatch the WebAssembly exports run.
func ExampleLedger() {
	call(wallet, abi.ExportDecide, `{"command":"top_up","input":{"amount":"0.10"},"state":null}`)
	call(wallet, abi.ExportEvolve, `{"fact":{"type":"topped_up","data":{"amount":0.1}},"state":{"balance":2}}`)
	call(wallet, abi.ExportDecide, `{"command":"balance","state":{"balance":2.1}}`)
	// Output:
	// status 0: {"facts":[{"type":"topped_up","data":{"amount":0.1}}]}
	// status 0: {"balance":2.1}
	// status 0: {"result":{"balance":2.1}}
}

// Register makes a plugin the one a WebAssembly module serves. Call it
// from an init function of the plugin's main package.
func ExampleRegister() {
	sdk.Register(wallet)
	fmt.Println("registered", wallet.Description().Name)
	// Output: registered wallet
}

func ExampleWrite() {
	call(wallet, abi.ExportDecide, `{"command":"top_up","input":{"amount":5}}`)
	// Output: status 0: {"facts":[{"type":"topped_up","data":{"amount":5}}]}
}

func ExampleRead() {
	call(wallet, abi.ExportDecide, `{"command":"balance","state":{"balance":"7.50"}}`)
	// Output: status 0: {"result":{"balance":7.5}}
}

func ExampleRefuse() {
	call(wallet, abi.ExportDecide, `{"command":"spend","input":{"amount":5},"state":{"balance":2}}`)
	// Output: status 1: {"code":"insufficient_funds","message":"the wallet holds 2"}
}

func ExampleInvalid() {
	call(wallet, abi.ExportDecide, `{"command":"top_up","input":{"amount":-1}}`)
	// Output: status 2: {"code":"not_positive","message":"amount must be positive","field":"amount"}
}

func ExampleInvoke() {
	call(wallet, abi.ExportDecide, `{"command":"withdraw"}`)
	out := sdk.Invoke(wallet, abi.ExportDescribe, nil)
	var d abi.Description
	_ = json.Unmarshal(out[1:], &d)
	fmt.Println(d.Name, d.Kind, d.Commands[0].Method, d.Commands[0].Path)
	// Output:
	// status 3: {"code":"unknown_command","message":"ledger wallet has no command \"withdraw\""}
	// wallet ledger POST /top_up
}

func ExampleCheck() {
	broken := &sdk.Ledger[Wallet]{Name: "wallet", Version: "1.0.0", EntityTypes: []string{"wallet"}}
	fmt.Println(sdk.Check(broken))
	// Output: sdk: plugin "wallet": Evolve is nil
}

// A subscription handler returns actions for the host to carry out.
func ExampleSubscription() {
	notify := &sdk.Subscription{
		Name:    "notify",
		Version: "1.0.0",
		Handlers: []sdk.Handler{{
			Name: "big_spend",
			Handle: func(f sdk.Fact) ([]sdk.Action, error) {
				return []sdk.Action{{EntityID: f.EntityID, Type: "flagged", Data: map[string]string{"because": f.ID}}}, nil
			},
		}},
	}
	call(notify, abi.ExportHandle, `{"handler":"big_spend","fact":{"id":"fct_1","type":"spent","entity_id":"w1","timestamp":1}}`)
	// Output: status 0: {"actions":[{"kind":"append","entity_id":"w1","type":"flagged","data":{"because":"fct_1"}}]}
}

func ExampleFact_Decode() {
	f := sdk.Fact{Type: "spent", Data: []byte(`{"amount":"12.50"}`)}
	var a Amount
	err := f.Decode(&a)
	fmt.Println(a.Amount, err)
	// Output: 12.5 <nil>
}

// A raw append recorded as it came: Data is the input's JSON object,
// kept byte for byte.
func ExampleAppendInput() {
	passThrough := &sdk.Ledger[Wallet]{
		Name: "raw", Version: "1.0.0", EntityTypes: []string{"wallet"}, Emits: []string{"topped_up"},
		Evolve: wallet.Evolve,
		Commands: []sdk.Decider[Wallet]{
			sdk.Write(sdk.Command{Name: abi.CommandAppend}, func(_ Wallet, cmd sdk.Cmd[sdk.AppendInput]) ([]sdk.NewFact, error) {
				return []sdk.NewFact{{Type: cmd.Input.Type, Subtype: cmd.Input.Subtype, Data: cmd.Input.Data}}, nil
			}),
		},
	}
	call(passThrough, abi.ExportDecide, `{"command":"append","input":{"type":"topped_up","subtype":"card","data":{"amount":1.50}}}`)
	// Output: status 0: {"facts":[{"type":"topped_up","subtype":"card","data":{"amount":1.50}}]}
}

func ExampleAppendInput_DecodeData() {
	appendOnly := &sdk.Ledger[Wallet]{
		Name: "raw", Version: "1.0.0", EntityTypes: []string{"wallet"}, Emits: []string{"topped_up"},
		Evolve: wallet.Evolve,
		Commands: []sdk.Decider[Wallet]{
			sdk.Write(sdk.Command{Name: abi.CommandAppend}, func(_ Wallet, cmd sdk.Cmd[sdk.AppendInput]) ([]sdk.NewFact, error) {
				var a Amount
				if err := cmd.Input.DecodeData(&a); err != nil {
					return nil, err
				}
				return []sdk.NewFact{{Type: cmd.Input.Type, Data: a}}, nil
			}),
		},
	}
	call(appendOnly, abi.ExportDecide, `{"command":"append","input":{"type":"topped_up","data":{"amount":"1.50"}}}`)
	call(appendOnly, abi.ExportDecide, `{"command":"append","input":{"type":"topped_up","data":{"amount":true}}}`)
	// Output:
	// status 0: {"facts":[{"type":"topped_up","data":{"amount":1.5}}]}
	// status 2: {"code":"invalid_decimal","message":"not a decimal number","field":"data.amount"}
}

// Decimal is exact: 0.1 added ten times is 1.
func ExampleDecimal() {
	var sum sdk.Decimal
	for range 10 {
		sum = sum.Add(sdk.MustDecimal("0.1"))
	}
	fmt.Println(sum, sum.Cmp(sdk.NewDecimal(1, 0)))
	// Output: 1 0
}

func ExampleParseDecimal() {
	d, err := sdk.ParseDecimal("-12.50")
	fmt.Println(d, d.Scale(), d.Sign(), err)
	_, err = sdk.ParseDecimal("0.1234567890123456789")
	fmt.Println(err)
	// Output:
	// -12.5 1 -1 <nil>
	// decimal has more than 18 decimal places
}

func ExampleNewDecimal() {
	fmt.Println(sdk.NewDecimal(1999, 2), sdk.NewDecimal(-5, 0).Abs(), sdk.NewDecimal(3, 1).Neg())
	// Output: 19.99 5 -0.3
}

func ExampleDecimal_Sub() {
	a, b := sdk.MustDecimal("10"), sdk.MustDecimal("0.01")
	fmt.Println(a.Sub(b), b.Sub(a), a.Sub(a).IsZero())
	// Output: 9.99 -9.99 true
}

// Point decodes itself with a Decoder, without reflection.
type Point struct {
	X, Y  int64
	Label string
}

func (p *Point) DecodeJSON(d *sdk.Decoder) error {
	return d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "x":
			p.X, err = d.Int()
		case "y":
			p.Y, err = d.Int()
		case "label":
			p.Label, err = d.String()
		default:
			err = d.Skip()
		}
		return err
	})
}

func (p Point) EncodeJSON(e *sdk.Encoder) {
	e.BeginObject()
	e.Key("x")
	e.Int(p.X)
	e.Key("y")
	e.Int(p.Y)
	if p.Label != "" {
		e.Key("label")
		e.String(p.Label)
	}
	e.EndObject()
}

func ExampleDecoder_Object() {
	var p Point
	err := p.DecodeJSON(sdk.NewDecoder([]byte(`{"x":1,"y":-2,"label":"a \"b\"","extra":[1,2]}`)))
	fmt.Printf("%+v %v\n", p, err)
	err = p.DecodeJSON(sdk.NewDecoder([]byte(`{"x":"1"}`)))
	fmt.Println(err)
	// Output:
	// {X:1 Y:-2 Label:a "b"} <nil>
	// invalid_type: x: expected integer, got a string
}

func ExampleDecoder_Array() {
	d := sdk.NewDecoder([]byte(`[{"x":1},{"x":2,"y":3}]`))
	var ps []Point
	err := d.Array(func() error {
		var p Point
		err := d.Value(&p)
		ps = append(ps, p)
		return err
	})
	fmt.Println(ps, err)
	// Output: [{1 0 } {2 3 }] <nil>
}

func ExampleDecoder_Decimal() {
	d := sdk.NewDecoder([]byte(`["19.99", 0.01, 1e2]`))
	var sum sdk.Decimal
	_ = d.Array(func() error {
		v, err := d.Decimal()
		sum = sum.Add(v)
		return err
	})
	fmt.Println(sum)
	// Output: 120
}

func ExampleEncoder() {
	var e sdk.Encoder
	e.BeginObject()
	e.Key("points")
	e.BeginArray()
	e.Value(Point{X: 1, Y: 2, Label: "p"})
	e.Value(map[string]int{"x": 3})
	e.EndArray()
	e.Key("total")
	e.Decimal(sdk.MustDecimal("0.30"))
	e.EndObject()
	fmt.Println(string(e.Bytes()), e.Err())
	// Output: {"points":[{"x":1,"y":2,"label":"p"},{"x":3}],"total":0.3} <nil>
}

func ExampleNewDecoder() {
	d := sdk.NewDecoder([]byte(`{"keep":{"a":[1,2]},"n":7} `))
	var kept []byte
	var n int64
	err := d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "keep":
			kept, err = d.Raw() // the value's JSON text, as it is
		case "n":
			n, err = d.Int()
		default:
			err = d.Skip()
		}
		return err
	})
	fmt.Println(string(kept), n, err, d.End())
	d.Reset([]byte(`null`))
	fmt.Println(d.Null(), d.End())
	// Output:
	// {"a":[1,2]} 7 <nil> <nil>
	// true <nil>
}
