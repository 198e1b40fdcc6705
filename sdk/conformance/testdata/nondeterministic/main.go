// Command nondeterministic is a broken fixture: its decide reads the
// guest's clock instead of the time the host passes in, so the same input
// gives different facts.
package main

import (
	"time"

	"github.com/factline/factline/sdk"
)

func main() {}

type stamp struct {
	At int64 `json:"at"`
}

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "nondeterministic", Version: "1.0.0", EntityTypes: []string{"thing"}, Emits: []string{"stamped"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Write(sdk.Command{Name: "stamp", Method: "POST", Path: "/stamp"}, func(struct{}, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				return []sdk.NewFact{{Type: "stamped", Data: stamp{At: time.Now().UnixNano()}}}, nil
			}),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
