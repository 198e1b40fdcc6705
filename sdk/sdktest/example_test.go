package sdktest_test

import (
	"encoding/json"
	"fmt"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
	"github.com/factline/factline/sdk/sdktest"
)

type counter struct {
	N int `json:"n"`
}

var counterLedger = &sdk.Ledger[counter]{
	Name: "counter", Version: "1.0.0", EntityTypes: []string{"counter"}, Emits: []string{"ticked"},
	Commands: []sdk.Decider[counter]{
		sdk.Write(sdk.Command{Name: "tick", Method: "POST", Path: "/tick"}, func(c counter, cmd sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
			if c.N >= 2 {
				return nil, sdk.Refuse("limit", "two ticks at most")
			}
			return []sdk.NewFact{{Type: "ticked", Subtype: "manual", Data: json.RawMessage(`{"by":1}`)}}, nil
		}),
		sdk.Read(sdk.Command{Name: "count", Method: "GET", Path: "/count"}, func(c counter, _ sdk.Cmd[struct{}]) (int, error) { return c.N, nil }),
	},
	Evolve: func(c counter, f sdk.Fact) counter { c.N++; return c },
}

// An Entity plays the host: Do decides, records the facts and folds them
// into the state.
func ExampleEntity() {
	e := sdktest.NewEntity(counterLedger, "counter", "c1")
	fmt.Println(e.Do("tick", ""))
	fmt.Println(e.Do("tick", ""))
	fmt.Println(e.Do("tick", ""))
	fmt.Println(e.Decide("count", ""))
	fmt.Println(string(e.State), e.Ref.Version, len(e.Facts), e.Facts[1].Seq)
	rebuilt, err := e.Rebuild()
	fmt.Println(string(rebuilt), err)
	// Output:
	// ok ticked/manual {"by":1}
	// ok ticked/manual {"by":1}
	// status 1 limit: two ticks at most
	// ok result 2
	// {"n":2} 3 2 2
	// {"n":2} <nil>
}

func ExampleEvolve() {
	state, err := sdktest.Evolve(counterLedger, json.RawMessage(`{"n":5}`), abi.Fact{ID: "f1", Type: "ticked"})
	fmt.Println(string(state), err == nil)
	// Output: {"n":6} true
}

func ExampleHandle() {
	echo := &sdk.Subscription{Name: "echo", Version: "1.0.0", Handlers: []sdk.Handler{{
		Name: "echo",
		Handle: func(f sdk.Fact) ([]sdk.Action, error) {
			return []sdk.Action{{EntityID: f.EntityID, Type: "echoed", Subtype: f.Subtype}}, nil
		},
	}}}
	fmt.Println(sdktest.Handle(echo, "echo", abi.Fact{ID: "f1", Type: "outcome", Subtype: "no_answer", EntityID: "a1"}))
	fmt.Println(sdktest.Handle(echo, "other", abi.Fact{}))
	// Output:
	// ok append a1 echoed/no_answer
	// status 3 unknown_command: subscription echo has no handler "other"
}

func ExampleDecideInput() {
	msg := sdktest.DecideInput("tick", abi.EntityRef{ID: "c1", Type: "counter", TenantID: "t", Version: 4}, nil, "{not json", 7)
	fmt.Println(string(msg))
	fmt.Println(string(sdk.Invoke(counterLedger, abi.ExportDecide, msg)[1:]))
	// Output:
	// {"command":"tick","entity":{"id":"c1","type":"counter","tenant_id":"t","version":4},"state":null,"input":{not json,"now":7}
	// {"code":"invalid_json","message":"expected a string key at offset 106"}
}
