package sdk_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
)

// Earn is the input of a command that records points.
type Earn struct {
	Points int               `json:"points"`
	Reason string            `json:"reason,omitempty"`
	Tags   []string          `json:"tags,omitempty"`
	Worth  sdk.Decimal       `json:"worth,omitempty"`
	Extra  map[string]string `json:"extra,omitempty"`
	Source *Source           `json:"source,omitempty"`
	secret string            //nolint:unused // an unexported field the schema must leave out
}

// Source is nested in Earn.
type Source struct {
	Kind string `json:"kind"`
}

func ExampleSchemaOf() {
	var v any
	_ = json.Unmarshal(sdk.SchemaOf[Earn](), &v)
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "properties": {
	//     "extra": {
	//       "additionalProperties": {
	//         "type": "string"
	//       },
	//       "type": "object"
	//     },
	//     "points": {
	//       "type": "integer"
	//     },
	//     "reason": {
	//       "type": "string"
	//     },
	//     "source": {
	//       "properties": {
	//         "kind": {
	//           "type": "string"
	//         }
	//       },
	//       "required": [
	//         "kind"
	//       ],
	//       "type": "object"
	//     },
	//     "tags": {
	//       "items": {
	//         "type": "string"
	//       },
	//       "type": "array"
	//     },
	//     "worth": {
	//       "format": "decimal",
	//       "type": "number"
	//     }
	//   },
	//   "required": [
	//     "points"
	//   ],
	//   "type": "object"
	// }
}

// points is a Schemer: its JSON form is a bare integer.
type points struct{ n int } //nolint:unused // its schema comes from JSONSchema, not its fields

func (points) JSONSchema() json.RawMessage { return json.RawMessage(`{"type":"integer","minimum":0}`) }

type tree struct {
	Name     string `json:"name"`
	Children []tree `json:"children,omitempty"`
}

type embedded struct {
	Source
	ID   string `json:"id"`
	Skip string `json:"-"`
	Bare bool
}

func TestSchemaOfDerivesFromGoTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		got  json.RawMessage
		want string
	}{
		{"no input", sdk.SchemaOf[struct{}](), `{"properties":{},"type":"object"}`},
		{"basic", sdk.SchemaOf[float64](), `{"type":"number"}`},
		{"schemer", sdk.SchemaOf[points](), `{"type":"integer","minimum":0}`},
		{"recursive", sdk.SchemaOf[tree](), `{"properties":{"children":{"items":{"type":"object"},"type":"array"},"name":{"type":"string"}},"required":["name"],"type":"object"}`},
		{"embedded, skipped, untagged", sdk.SchemaOf[embedded](), `{"properties":{"Bare":{"type":"boolean"},"id":{"type":"string"},"kind":{"type":"string"}},"required":["kind","id","Bare"],"type":"object"}`},
		{"raw", sdk.SchemaOf[json.RawMessage](), `{}`},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, tc.got, tc.want)
		}
	}
}

func TestCommandsDescribeInputAndResultSchemas(t *testing.T) {
	t.Parallel()
	type state struct{}
	type total struct {
		Points int `json:"points"`
	}
	l := &sdk.Ledger[state]{
		Commands: []sdk.Decider[state]{
			sdk.Write(sdk.Command{Name: "earn"}, func(state, sdk.Cmd[Earn]) ([]sdk.NewFact, error) { return nil, nil }),
			sdk.Read(sdk.Command{Name: "total"}, func(state, sdk.Cmd[struct{}]) (total, error) { return total{}, nil }),
		},
	}
	cmds := l.Description().Commands
	byName := map[string]abi.Command{}
	for _, c := range cmds {
		byName[c.Name] = c
	}
	if s := string(byName["earn"].InputSchema); !strings.Contains(s, `"points":{"type":"integer"}`) {
		t.Errorf("earn input schema %s", s)
	}
	if s := byName["earn"].ResultSchema; s != nil {
		t.Errorf("a write command describes a result: %s", s)
	}
	if s := string(byName["total"].ResultSchema); s != `{"properties":{"points":{"type":"integer"}},"required":["points"],"type":"object"}` {
		t.Errorf("total result schema %s", s)
	}
}
