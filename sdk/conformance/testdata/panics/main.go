// Command panics is a ledger whose command panics on every input: the SDK
// turns the panic into a status 5 reply, an error reply rather than a
// trap, but the host answers every such call 500, and the kit's replay
// check fails it.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "panics", Version: "1.0.0", EntityTypes: []string{"thing"}, Emits: []string{"never"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Write(sdk.Command{Name: "explode", Method: "POST", Path: "/explode"}, func(struct{}, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				panic("boom")
			}),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
