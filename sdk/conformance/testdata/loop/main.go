// Command loop is a broken fixture: its command spin never returns, so
// the host stops it at the call's deadline.
package main

import "github.com/factline/factline/sdk"

func main() {}

var spins int

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "loop", Version: "1.0.0", EntityTypes: []string{"thing"}, Emits: []string{"spun"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Write(sdk.Command{Name: "spin", Method: "POST", Path: "/spin"}, func(struct{}, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				for {
					spins++
				}
			}),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
