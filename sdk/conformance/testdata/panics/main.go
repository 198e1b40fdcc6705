// Command panics is a well-behaved fixture despite its name: its command
// panics, and the SDK turns the panic into a status 5 reply, which is an
// error reply, not a trap. It passes every check.
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
