// Command asset is the ledger plugin of entity type asset: something an
// account owns that does work and produces outcomes (a phone line, an
// agent, a model).
//
// Fact types: invocation (the asset was used; the subtype, optional, says
// how) and outcome (what came of it; the subtype is required: no_answer,
// answered, deal_won, followup_scheduled, ...). Subtypes are lowercase
// identifiers ([a-z][a-z0-9_]*, at most 64). The state counts facts per
// type and per subtype:
//
//	{"fact_count":3,"invocations":2,"invocation_counts":{"call":2},
//	 "outcomes":1,"outcome_counts":{"no_answer":1},"last_fact_at":1764000000000}
//
// Commands: record_invocation (POST /invocations, {subtype?, data?}),
// record_outcome (POST /outcomes, {subtype, data?}), stats (GET /stats)
// and the raw append of either fact type under the same rules.
package main

import (
	"encoding/json"

	"github.com/factline/factline/plugins/internal/counts"
	"github.com/factline/factline/sdk"
)

func main() {}

func init() { sdk.Register(Ledger) }

// Fact types.
const (
	Invocation = "invocation"
	Outcome    = "outcome"
)

// Ledger is the plugin.
var Ledger = &sdk.Ledger[State]{
	Name:        "asset",
	Version:     "1.0.0",
	EntityTypes: []string{"asset"},
	Emits:       []string{Invocation, Outcome},
	Commands: []sdk.Decider[State]{
		sdk.Write(sdk.Command{Name: "record_invocation", Method: "POST", Path: "/invocations", Emits: []string{Invocation},
			Description: "Record that the asset was used"}, recordFact(Invocation)),
		sdk.Write(sdk.Command{Name: "record_outcome", Method: "POST", Path: "/outcomes", Emits: []string{Outcome},
			Description: "Record what came of the asset's work"}, recordFact(Outcome)),
		sdk.Read(sdk.Command{Name: "stats", Method: "GET", Path: "/stats", Description: "Counts of invocations and outcomes"}, stats),
		sdk.Write(sdk.Command{Name: "append", Description: "Raw append of an invocation or an outcome"}, appendFact),
	},
	Evolve: evolve,
}

// Input is the input of record_invocation and record_outcome.
type Input struct {
	Subtype string
	Data    json.RawMessage // an object, kept as the fact's data
}

// JSONSchema implements sdk.Schemer.
func (Input) JSONSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"subtype":{"type":"string"},"data":{"type":"object"}}}`)
}

// DecodeJSON implements sdk.Decodable.
func (in *Input) DecodeJSON(d *sdk.Decoder) error {
	return d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "subtype":
			in.Subtype, err = d.String()
		case "data":
			in.Data, err = d.Raw()
		default:
			err = d.Skip()
		}
		return err
	})
}

func recordFact(factType string) func(State, sdk.Cmd[Input]) ([]sdk.NewFact, error) {
	return func(_ State, cmd sdk.Cmd[Input]) ([]sdk.NewFact, error) {
		f, err := check(factType, cmd.Input.Subtype, cmd.Input.Data)
		if err != nil {
			return nil, err
		}
		return []sdk.NewFact{f}, nil
	}
}

func appendFact(_ State, cmd sdk.Cmd[sdk.AppendInput]) ([]sdk.NewFact, error) {
	in := cmd.Input
	if in.Type != Invocation && in.Type != Outcome {
		return nil, sdk.Invalid("type", "unknown_fact_type", "an asset records invocation and outcome facts, not \""+in.Type+"\"")
	}
	f, err := check(in.Type, in.Subtype, in.Data)
	if err != nil {
		return nil, err
	}
	f.Timestamp = in.Timestamp
	return []sdk.NewFact{f}, nil
}

// check applies the rules to a fact: an outcome has a subtype, subtypes
// are identifiers, data is an object.
func check(factType, subtype string, data []byte) (sdk.NewFact, error) {
	switch {
	case factType == Outcome && subtype == "":
		return sdk.NewFact{}, sdk.Invalid("subtype", "required", "an outcome needs a subtype, such as no_answer or deal_won")
	case subtype != "" && !identifier(subtype):
		return sdk.NewFact{}, sdk.Invalid("subtype", "invalid_subtype", "a subtype is a lowercase identifier ([a-z][a-z0-9_]*, at most 64)")
	case len(data) > 0 && string(data) != "null" && data[0] != '{':
		return sdk.NewFact{}, sdk.Invalid("data", "invalid_type", "data must be an object")
	}
	f := sdk.NewFact{Type: factType, Subtype: subtype}
	if len(data) > 0 && string(data) != "null" {
		f.Data = json.RawMessage(data)
	}
	return f, nil
}

func identifier(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func stats(s State, _ sdk.Cmd[struct{}]) (State, error) { return s, nil }

func evolve(s State, f sdk.Fact) State {
	switch f.Type {
	case Invocation:
		s.Invocations++
		if f.Subtype != "" {
			s.InvocationCounts = s.InvocationCounts.Add(f.Subtype)
		}
	case Outcome:
		s.Outcomes++
		if f.Subtype != "" {
			s.OutcomeCounts = s.OutcomeCounts.Add(f.Subtype)
		}
	default:
		return s
	}
	s.FactCount++
	s.LastFactAt = max(s.LastFactAt, f.Timestamp)
	return s
}

// State is an asset's folded ledger.
type State struct {
	FactCount        int64
	Invocations      int64
	InvocationCounts counts.Counts
	Outcomes         int64
	OutcomeCounts    counts.Counts
	LastFactAt       int64 // ms since the epoch; 0 before any fact
}

// DecodeJSON implements sdk.Decodable.
func (s *State) DecodeJSON(d *sdk.Decoder) error {
	return d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "fact_count":
			s.FactCount, err = d.Int()
		case "invocations":
			s.Invocations, err = d.Int()
		case "invocation_counts":
			err = s.InvocationCounts.DecodeJSON(d)
		case "outcomes":
			s.Outcomes, err = d.Int()
		case "outcome_counts":
			err = s.OutcomeCounts.DecodeJSON(d)
		case "last_fact_at":
			s.LastFactAt, err = d.Int()
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
	e.Key("invocations")
	e.Int(s.Invocations)
	e.Key("invocation_counts")
	s.InvocationCounts.EncodeJSON(e)
	e.Key("outcomes")
	e.Int(s.Outcomes)
	e.Key("outcome_counts")
	s.OutcomeCounts.EncodeJSON(e)
	e.Key("last_fact_at")
	e.Int(s.LastFactAt)
	e.EndObject()
}
