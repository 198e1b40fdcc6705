// Command points is the loyalty-points ledger of the SDK guide
// (sdk/README.md), plus raw appends of earned facts: its write commands
// refuse {} (and the kit's default append, whose data is {}), so it
// records a fact only when given an input it accepts.
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
		sdk.Write(sdk.Command{Name: "append", Emits: []string{"earned"}}, appendFact),
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

// appendFact records a raw earned fact under the rules of earn.
func appendFact(s state, cmd sdk.Cmd[sdk.AppendInput]) ([]sdk.NewFact, error) {
	if cmd.Input.Type != "earned" {
		return nil, sdk.Invalid("type", "unknown_fact_type", "a member records earned facts")
	}
	var in earnInput
	if err := cmd.Input.DecodeData(&in); err != nil {
		return nil, err
	}
	return earn(s, sdk.Cmd[earnInput]{Input: in})
}
