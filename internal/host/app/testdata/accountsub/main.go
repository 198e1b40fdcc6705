// Command accountsub is a subscription plugin named account, the ledger
// the domain model gives entity types account and contact: uploaded over
// the account ledger it is refused, since a subscription serves no
// entity type.
package main

import "github.com/factline/factline/sdk"

func main() {}

func init() {
	sdk.Register(&sdk.Subscription{
		Name: "account", Version: "9.0.0", Emits: []string{"outcome"},
		Handlers: []sdk.Handler{{Name: "noop", Handle: func(sdk.Fact) ([]sdk.Action, error) { return nil, nil }}},
	})
}
