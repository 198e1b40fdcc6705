// Command clash is a subscription plugin whose handler has the name of
// the followup plugin's, no_answer_followup.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Subscription{
		Name: "clash", Version: "1.0.0", Emits: []string{"outcome"},
		Handlers: []sdk.Handler{{Name: "no_answer_followup", Handle: func(sdk.Fact) ([]sdk.Action, error) { return nil, nil }}},
	})
}
