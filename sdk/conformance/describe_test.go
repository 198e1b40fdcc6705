package conformance

import (
	"strings"
	"testing"

	"github.com/factline/factline/sdk/abi"
)

// TestDescribeEmits: emits lists fact types, or is abi.AnyFactType alone
// (a ledger's, top level or a command's); a command emits only what the
// top level allows.
func TestDescribeEmits(t *testing.T) {
	t.Parallel()
	ledger := func(top []string, cmd []string) abi.Description {
		return abi.Description{ABI: abi.Version, Name: "x", Version: "1.0.0", Kind: abi.KindLedger, EntityTypes: []string{"t"},
			Commands: []abi.Command{{Name: "a", Emits: cmd}}, Emits: top}
	}
	for _, tc := range []struct {
		name string
		d    abi.Description
		want string // "" when valid
	}{
		{"named", ledger([]string{"e"}, []string{"e"}), ""},
		{"any", ledger([]string{abi.AnyFactType}, []string{"e"}), ""},
		{"any in a command", ledger([]string{abi.AnyFactType}, []string{abi.AnyFactType}), ""},
		{"command any, top level named", ledger([]string{"e"}, []string{abi.AnyFactType}), `command "a" emits "*", which the top-level emits does not list`},
		{"any beside named", ledger([]string{abi.AnyFactType, "e"}, nil), `emits lists "*" beside other fact types`},
		{"command any beside named", ledger([]string{abi.AnyFactType}, []string{"e", abi.AnyFactType}), `command "a" emits lists "*" beside`},
		{"subscription", abi.Description{ABI: abi.Version, Name: "s", Version: "1.0.0", Kind: abi.KindSubscription, Handlers: []string{"h"},
			Emits: []string{abi.AnyFactType}}, "only a ledger records any fact type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(describeProblems(tc.d), "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
}
