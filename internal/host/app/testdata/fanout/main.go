// Command fanout is a subscription plugin whose handler fanout answers a
// no_answer outcome with 70 follow-up outcomes on the same entity, more
// than the 64 actions one fact may cause.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Subscription{
		Name: "fanout", Version: "1.0.0", Emits: []string{"outcome"},
		Handlers: []sdk.Handler{{Name: "fanout", Handle: func(f sdk.Fact) ([]sdk.Action, error) {
			if f.Subtype != "no_answer" {
				return nil, nil
			}
			out := make([]sdk.Action, 70)
			for i := range out {
				out[i] = sdk.Action{EntityID: f.EntityID, Type: "outcome", Subtype: "fanned", Data: map[string]int{"n": i}}
			}
			return out, nil
		}}},
	})
}
