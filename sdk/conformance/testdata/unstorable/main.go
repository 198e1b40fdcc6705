// Command unstorable is a broken fixture: its note command decides fact
// data with a NUL character, or, given {"where":"state"}, fine data whose
// evolve returns a state with a NUL. The host refuses both as the
// ledger's fault: no store holds a NUL.
package main

import "github.com/factline/factline/sdk"

func main() {}

type where struct {
	Where string `json:"where"`
}

type note struct {
	Text string `json:"text"`
}

func init() {
	sdk.Register(&sdk.Ledger[map[string]string]{
		Name: "unstorable", Version: "1.0.0", EntityTypes: []string{"thing"}, Emits: []string{"noted"},
		Commands: []sdk.Decider[map[string]string]{
			sdk.Write(sdk.Command{Name: "note", Method: "POST", Path: "/note"}, func(_ map[string]string, cmd sdk.Cmd[where]) ([]sdk.NewFact, error) {
				if cmd.Input.Where == "state" {
					return []sdk.NewFact{{Type: "noted", Data: note{Text: "state"}}}, nil
				}
				return []sdk.NewFact{{Type: "noted", Data: note{Text: "a\x00b"}}}, nil
			}),
		},
		Evolve: func(s map[string]string, f sdk.Fact) map[string]string {
			var n note
			_ = f.Decode(&n)
			if n.Text == "state" {
				return map[string]string{"last": "x\x00y"}
			}
			return s
		},
	})
}
