// Command generic is one ledger plugin for the entity types whose logic is
// "record what happened": contact, deal, campaign, tool, vendor and user.
// It is configured per entity type by the table Types below (the fact
// types each type records, as in manifests/domain.yaml), accepts raw
// appends of those fact types and keeps a small state per entity:
//
//	{"fact_count":3,"last_fact_at":1764000000000,"counts":{"call":1,"note":2}}
//
// Commands: append (the raw append; a fact type the entity's type does not
// record is refused with undeclared_fact_type) and summary (GET /summary,
// the state).
package main

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/factline/factline/plugins/internal/counts"
	"github.com/factline/factline/sdk"
)

func main() {}

func init() { sdk.Register(Ledger) }

// Types is the configuration: for each entity type the plugin serves, the
// fact types it records. Keep it in step with the domain manifest (the
// host checks fact types against the manifest first; this table makes the
// plugin refuse a type it was not built for).
var Types = map[string][]string{
	"contact":  {"note", "call", "email", "meeting", "outcome", "status_changed"},
	"deal":     {"stage_changed", "amount_changed", "note", "outcome", "won", "lost"},
	"campaign": {"launched", "paused", "resumed", "completed", "enrollment", "spend", "outcome"},
	"tool":     {"invocation", "outcome", "cost"},
	"vendor":   {"invoice", "payment", "note"},
	"user":     {"invited", "login", "role_changed", "deactivated"},
}

// Ledger is the plugin.
var Ledger = &sdk.Ledger[State]{
	Name:        "generic",
	Version:     "1.0.0",
	EntityTypes: keys(Types),
	Emits:       union(Types),
	Commands: []sdk.Decider[State]{
		sdk.Write(sdk.Command{Name: "append", Description: "Raw append of a fact type the entity's type records"}, appendFact),
		sdk.Read(sdk.Command{Name: "summary", Method: "GET", Path: "/summary", Description: "Fact counts per type and the last fact's time"}, summary),
	},
	Evolve: evolve,
}

func appendFact(_ State, cmd sdk.Cmd[sdk.AppendInput]) ([]sdk.NewFact, error) {
	in := cmd.Input
	if !slices.Contains(Types[cmd.Entity.Type], in.Type) {
		return nil, sdk.Refuse("undeclared_fact_type", "entities of type "+cmd.Entity.Type+" do not record "+in.Type+" facts")
	}
	f := sdk.NewFact{Type: in.Type, Subtype: in.Subtype, Timestamp: in.Timestamp}
	if len(in.Data) > 0 && string(in.Data) != "null" {
		if in.Data[0] != '{' {
			return nil, sdk.Invalid("data", "invalid_type", "data must be an object")
		}
		f.Data = json.RawMessage(in.Data)
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

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func union(m map[string][]string) []string {
	var out []string
	for _, types := range m {
		for _, t := range types {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}
