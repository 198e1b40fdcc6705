// Command points2 is a version 2.0.0 of the points ledger
// (sdk/conformance/testdata/points) that serves entity type reward
// instead of member and has no earn command: installed while the domain
// model gives member to points and routes earn to it, it is refused.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "points", Version: "2.0.0", EntityTypes: []string{"reward"}, Emits: []string{"earned"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Read(sdk.Command{Name: "points", Method: "GET", Path: "/points"}, func(s struct{}, _ sdk.Cmd[struct{}]) (struct{}, error) { return s, nil }),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
