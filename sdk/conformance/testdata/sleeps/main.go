// Command sleeps is a broken fixture: its command nap sleeps an hour
// (time.Sleep waits in WASI's poll_oneoff, a host function), so the host
// stops it at the call's deadline.
package main

import (
	"time"

	"github.com/factline/factline/sdk"
)

func main() {}

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "sleeps", Version: "1.0.0", EntityTypes: []string{"thing"}, Emits: []string{"napped"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Write(sdk.Command{Name: "nap", Method: "POST", Path: "/nap"}, func(struct{}, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				time.Sleep(time.Hour)
				return nil, nil
			}),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
