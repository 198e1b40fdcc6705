// Command hog is a broken fixture: every decide keeps another MiB alive,
// so an instance's memory grows until it hits the cap.
package main

import "github.com/factline/factline/sdk"

func main() {}

var hoard [][]byte

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "hog", Version: "1.0.0", EntityTypes: []string{"thing"}, Emits: []string{"hoarded"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Write(sdk.Command{Name: "hoard", Method: "POST", Path: "/hoard"}, func(struct{}, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				b := make([]byte, 1<<20)
				for i := 0; i < len(b); i += 4096 {
					b[i] = 1 // touch every page
				}
				hoard = append(hoard, b)
				return nil, nil
			}),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
