// Command generic is one ledger plugin for the entity types whose logic is
// "record what happened": contact, deal, campaign, tool, vendor and user.
// It records any fact type the domain manifest declares for the entity's
// type (sdk.AnyFactType: the host refuses the others before it asks), so
// a domain manifest layer can add fact types to these types without a new
// build, and keeps a small state per entity:
//
//	{"fact_count":3,"last_fact_at":1764000000000,"counts":{"call":1,"note":2}}
//
// Commands: append (the raw append) and summary (GET /summary, the state).
package main

import (
	"github.com/factline/factline/plugins/internal/counts"
	"github.com/factline/factline/sdk"
)

func main() {}

func init() { sdk.Register(Ledger) }

// EntityTypes are the entity types the plugin serves; a domain manifest
// names it (ledger: generic) for them.
var EntityTypes = []string{"campaign", "contact", "deal", "tool", "user", "vendor"}

// Ledger is the plugin.
var Ledger = &sdk.Ledger[State]{
	Name:        "generic",
	Version:     "1.1.0",
	EntityTypes: EntityTypes,
	Emits:       []string{sdk.AnyFactType},
	Commands: []sdk.Decider[State]{
		sdk.Write(sdk.Command{Name: "append", Description: "Raw append of a fact type the entity's type declares"}, appendFact),
		sdk.Read(sdk.Command{Name: "summary", Method: "GET", Path: "/summary", Description: "Fact counts per type and the last fact's time"}, summary),
	},
	Evolve: evolve,
}

func appendFact(_ State, cmd sdk.Cmd[sdk.AppendInput]) ([]sdk.NewFact, error) {
	in := cmd.Input
	f := sdk.NewFact{Type: in.Type, Subtype: in.Subtype, Timestamp: in.Timestamp}
	if len(in.Data) > 0 && string(in.Data) != "null" {
		if in.Data[0] != '{' {
			return nil, sdk.Invalid("data", "invalid_type", "data must be an object")
		}
		f.Data = in.Data
	}
	return []sdk.NewFact{f}, nil
}

func summary(s State, _ sdk.Cmd[struct{}]) (State, error) { return s, nil }

func evolve(s State, f sdk.Fact) State {
	s.FactCount++
	s.LastFactAt = max(s.LastFactAt, f.Timestamp)
	s.Counts = s.Counts.Add(f.Type)
	return s
}

// State is an entity's folded ledger.
type State struct {
	FactCount  int64
	LastFactAt int64 // ms since the epoch; 0 before any fact
	Counts     counts.Counts
}

// DecodeJSON implements sdk.Decodable.
func (s *State) DecodeJSON(d *sdk.Decoder) error {
	return d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "fact_count":
			s.FactCount, err = d.Int()
		case "last_fact_at":
			s.LastFactAt, err = d.Int()
		case "counts":
			err = s.Counts.DecodeJSON(d)
		default:
			err = d.Skip()
		}
		return err
	})
}

// EncodeJSON implements sdk.Encodable.
func (s State) EncodeJSON(e *sdk.Encoder) {
	e.BeginObject()
	e.Key("fact_count")
	e.Int(s.FactCount)
	e.Key("last_fact_at")
	e.Int(s.LastFactAt)
	e.Key("counts")
	s.Counts.EncodeJSON(e)
	e.EndObject()
}
