// Command followupledger is a ledger plugin named followup, the
// subscription plugin whose handler the domain model's subscription
// no_answer_followup names: uploaded over it, it is refused, since a
// ledger serves no handler.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "followup", Version: "9.0.0", EntityTypes: []string{"note"}, Emits: []string{"noted"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Write(sdk.Command{Name: "note", Method: "POST", Path: "/note"}, func(struct{}, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				return []sdk.NewFact{{Type: "noted"}}, nil
			}),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
