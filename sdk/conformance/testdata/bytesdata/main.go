// Command bytesdata is a broken fixture: it gives a fact's data as a
// plain []byte, which encodes as a base64 string, so every fact it
// records is refused by the host (data must be a JSON object).
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Ledger[struct{}]{
		Name: "bytesdata", Version: "1.0.0", EntityTypes: []string{"thing"}, Emits: []string{"noted"},
		Commands: []sdk.Decider[struct{}]{
			sdk.Write(sdk.Command{Name: "note", Method: "POST", Path: "/note"}, func(struct{}, sdk.Cmd[struct{}]) ([]sdk.NewFact, error) {
				return []sdk.NewFact{{Type: "noted", Data: []byte(`{"text":"hi"}`)}}, nil
			}),
		},
		Evolve: func(s struct{}, _ sdk.Fact) struct{} { return s },
	})
}
