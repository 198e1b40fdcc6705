// Command points is the loyalty-points ledger of the SDK guide
// (sdk/README.md): its only write command refuses {}, so it records a
// fact only when given an input it accepts.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() { sdk.Register(ledger) }

type state struct {
	Points int64 `json:"points"`
}

type earnInput struct {
	Points int64 `json:"points"`
}

var ledger = &sdk.Ledger[state]{
	Name: "points", Version: "1.0.0", EntityTypes: []string{"member"}, Emits: []string{"earned"},
	Commands: []sdk.Decider[state]{
		sdk.Write(sdk.Command{Name: "earn", Method: "POST", Path: "/earn", Emits: []string{"earned"}}, earn),
		sdk.Read(sdk.Command{Name: "points", Method: "GET", Path: "/points"}, func(s state, _ sdk.Cmd[struct{}]) (state, error) { return s, nil }),
	},
	Evolve: func(s state, f sdk.Fact) state {
		var e earnInput
		if f.Type == "earned" && f.Decode(&e) == nil {
			s.Points += e.Points
		}
		return s
	},
}

func earn(s state, cmd sdk.Cmd[earnInput]) ([]sdk.NewFact, error) {
	if cmd.Input.Points <= 0 {
		return nil, sdk.Invalid("points", "not_positive", "points must be positive")
	}
	return []sdk.NewFact{{Type: "earned", Subtype: "manual", Data: cmd.Input}}, nil
}
