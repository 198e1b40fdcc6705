// Command followup2 is a version 2.0.0 of the followup subscription
// plugin (plugins/followup) whose handler was renamed: installed while the
// domain model's subscription no_answer_followup names the old handler,
// it is refused.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Subscription{
		Name: "followup", Version: "2.0.0", Emits: []string{"outcome"},
		Handlers: []sdk.Handler{{Name: "renamed_followup", Handle: func(sdk.Fact) ([]sdk.Action, error) { return nil, nil }}},
	})
}
