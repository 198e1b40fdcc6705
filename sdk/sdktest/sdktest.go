// Package sdktest runs plugins written with the Go SDK natively, through
// the same ABI messages and dispatch code the WebAssembly exports use, so a
// plugin is unit-tested with plain go test. Entity plays the host for one
// entity of a ledger: decide, then evolve of every recorded fact, keeping
// the state and the facts as the host would.
package sdktest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/factline/factline/sdk"
	"github.com/factline/factline/sdk/abi"
)

// Now is the decision time a new Entity starts with (ms since the epoch).
const Now int64 = 1764000000000

// TenantID is the tenant of every Entity.
const TenantID = "tenant-test"

// Entity is one entity of a ledger plugin, with its state and facts.
type Entity struct {
	Plugin sdk.Plugin
	Ref    abi.EntityRef   // Version grows by one per recorded fact
	State  json.RawMessage // the folded state; null before any fact
	Facts  []abi.Fact      // the recorded facts, in seq order
	Now    int64           // the decision time passed to decide and the default fact timestamp
}

// NewEntity returns an entity of the given type with no facts.
func NewEntity(p sdk.Plugin, entityType, id string) *Entity {
	return &Entity{
		Plugin: p,
		Ref:    abi.EntityRef{ID: id, Type: entityType, TenantID: TenantID, Version: 1},
		State:  json.RawMessage("null"),
		Now:    Now,
	}
}

// Reply is the outcome of a decide.
type Reply struct {
	Status   abi.Status
	Facts    []abi.NewFact   // the facts decide returned
	Recorded []abi.Fact      // Do only: the facts as recorded
	Result   json.RawMessage // a read-only command's result
	Err      *abi.ErrorReply // the error reply when Status is not 0
}

// OK reports a status 0 reply.
func (r Reply) OK() bool { return r.Status == abi.StatusOK }

// String describes the reply on one line: "ok deposit/manual {...}",
// "ok result {...}" or "status 1 insufficient_funds: ...".
func (r Reply) String() string {
	if !r.OK() {
		return fmt.Sprintf("status %d %s", r.Status, errString(r.Err))
	}
	var b strings.Builder
	b.WriteString("ok")
	for _, f := range r.Facts {
		b.WriteString(" " + f.Type)
		if f.Subtype != "" {
			b.WriteString("/" + f.Subtype)
		}
		if len(f.Data) > 0 {
			b.WriteString(" " + string(f.Data))
		}
	}
	if r.Result != nil {
		b.WriteString(" result " + string(r.Result))
	}
	return b.String()
}

func errString(e *abi.ErrorReply) string {
	if e == nil {
		return "(no error reply)"
	}
	if e.Field != "" {
		return e.Code + " (" + e.Field + "): " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Decide runs decide for a command on the current state and records
// nothing. input is the command's JSON input ("" for none).
func (e *Entity) Decide(command, input string) Reply {
	msg := DecideInput(command, e.Ref, e.State, input, e.Now)
	return parseDecide(sdk.Invoke(e.Plugin, abi.ExportDecide, msg))
}

// Do runs a command as the host does: decide on the current state, then
// record each fact (id, seq, timestamp) and fold it through evolve. When
// evolve fails nothing is recorded and its error is the reply.
func (e *Entity) Do(command, input string) Reply {
	r := e.Decide(command, input)
	if !r.OK() || len(r.Facts) == 0 {
		return r
	}
	state := e.State
	var recorded []abi.Fact
	for i, nf := range r.Facts {
		f := abi.Fact{
			ID:         "fct_" + e.Ref.ID + "_" + strconv.Itoa(len(e.Facts)+i+1),
			Type:       nf.Type,
			Subtype:    nf.Subtype,
			TenantID:   e.Ref.TenantID,
			EntityID:   e.Ref.ID,
			EntityType: e.Ref.Type,
			Seq:        int64(len(e.Facts) + i + 1),
			Position:   int64(len(e.Facts) + i + 1),
			Timestamp:  nf.Timestamp,
			Data:       nf.Data,
		}
		if f.Timestamp == 0 {
			f.Timestamp = e.Now
		}
		next, errReply := Evolve(e.Plugin, state, f)
		if errReply != nil {
			return Reply{Status: errReply.Status, Err: &errReply.ErrorReply}
		}
		state = next
		recorded = append(recorded, f)
	}
	e.State = state
	e.Facts = append(e.Facts, recorded...)
	e.Ref.Version += int64(len(recorded))
	r.Recorded = recorded
	return r
}

// Rebuild replays the entity's facts through evolve from null, as the host
// does to re-derive a snapshot; it should equal State.
func (e *Entity) Rebuild() (json.RawMessage, error) {
	state := json.RawMessage("null")
	for _, f := range e.Facts {
		next, errReply := Evolve(e.Plugin, state, f)
		if errReply != nil {
			return nil, errReply
		}
		state = next
	}
	return state, nil
}

// CallError is an error reply of evolve or handle.
type CallError struct {
	Status abi.Status
	abi.ErrorReply
}

func (e *CallError) Error() string {
	return fmt.Sprintf("status %d %s", e.Status, errString(&e.ErrorReply))
}

// Evolve folds one fact into a state.
func Evolve(p sdk.Plugin, state json.RawMessage, f abi.Fact) (json.RawMessage, *CallError) {
	if len(state) == 0 {
		state = json.RawMessage("null")
	}
	msg, err := json.Marshal(abi.EvolveInput{State: state, Fact: f})
	if err != nil {
		return nil, &CallError{Status: abi.StatusBadInput, ErrorReply: abi.ErrorReply{Code: "invalid_input", Message: err.Error()}}
	}
	out := sdk.Invoke(p, abi.ExportEvolve, msg)
	if cerr := replyError(out); cerr != nil {
		return nil, cerr
	}
	return json.RawMessage(out[1:]), nil
}

// HandleReply is the outcome of a subscription handler.
type HandleReply struct {
	Status  abi.Status
	Actions []abi.Action
	Err     *abi.ErrorReply
}

// OK reports a status 0 reply.
func (r HandleReply) OK() bool { return r.Status == abi.StatusOK }

// String describes the reply on one line.
func (r HandleReply) String() string {
	if !r.OK() {
		return fmt.Sprintf("status %d %s", r.Status, errString(r.Err))
	}
	var b strings.Builder
	b.WriteString("ok")
	for _, a := range r.Actions {
		fmt.Fprintf(&b, " %s %s %s", a.Kind, a.EntityID, a.Type)
		if a.Subtype != "" {
			b.WriteString("/" + a.Subtype)
		}
		if len(a.Data) > 0 {
			b.WriteString(" " + string(a.Data))
		}
	}
	return b.String()
}

// Handle runs a subscription handler on a fact.
func Handle(p sdk.Plugin, handler string, f abi.Fact) HandleReply {
	msg, err := json.Marshal(abi.HandleInput{Handler: handler, Fact: f})
	if err != nil {
		return HandleReply{Status: abi.StatusBadInput, Err: &abi.ErrorReply{Code: "invalid_input", Message: err.Error()}}
	}
	out := sdk.Invoke(p, abi.ExportHandle, msg)
	if cerr := replyError(out); cerr != nil {
		return HandleReply{Status: cerr.Status, Err: &cerr.ErrorReply}
	}
	var res abi.HandleResult
	if err := json.Unmarshal(out[1:], &res); err != nil {
		return HandleReply{Status: abi.StatusPanic, Err: &abi.ErrorReply{Code: "invalid_output", Message: err.Error()}}
	}
	return HandleReply{Actions: res.Actions}
}

// DecideInput builds a decide input message the way the host does. state
// and input are JSON text (empty for null) and are copied as they are, so
// malformed JSON can be sent on purpose.
func DecideInput(command string, entity abi.EntityRef, state json.RawMessage, input string, now int64) []byte {
	ent, _ := json.Marshal(entity)
	cmd, _ := json.Marshal(command)
	if len(state) == 0 {
		state = json.RawMessage("null")
	}
	if input == "" {
		input = "null"
	}
	b := make([]byte, 0, 96+len(ent)+len(state)+len(input))
	b = append(b, `{"command":`...)
	b = append(b, cmd...)
	b = append(b, `,"entity":`...)
	b = append(b, ent...)
	b = append(b, `,"state":`...)
	b = append(b, state...)
	b = append(b, `,"input":`...)
	b = append(b, input...)
	b = append(b, `,"now":`...)
	b = strconv.AppendInt(b, now, 10)
	return append(b, '}')
}

func replyError(out []byte) *CallError {
	if len(out) == 0 {
		return &CallError{Status: abi.StatusPanic, ErrorReply: abi.ErrorReply{Code: "empty_output", Message: "the plugin wrote no output"}}
	}
	if abi.Status(out[0]) == abi.StatusOK {
		return nil
	}
	ce := &CallError{Status: abi.Status(out[0])}
	if err := json.Unmarshal(out[1:], &ce.ErrorReply); err != nil {
		ce.Code, ce.Message = "invalid_output", err.Error()
	}
	return ce
}

func parseDecide(out []byte) Reply {
	if cerr := replyError(out); cerr != nil {
		return Reply{Status: cerr.Status, Err: &cerr.ErrorReply}
	}
	var res abi.DecideResult
	if err := json.Unmarshal(out[1:], &res); err != nil {
		return Reply{Status: abi.StatusPanic, Err: &abi.ErrorReply{Code: "invalid_output", Message: err.Error()}}
	}
	return Reply{Facts: res.Facts, Result: res.Result}
}
