package sdk

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/factline/factline/sdk/abi"
)

// Subscription is a subscription plugin: handlers that react to recorded
// facts (a domain manifest's subscriptions route facts to them by name) by
// returning actions for the host to carry out.
type Subscription struct {
	Name     string
	Version  string
	Emits    []string // optional: the fact types its actions append
	Handlers []Handler
}

// Handler reacts to one fact. The host delivers a fact at least once and
// applies each returned action exactly once, so Handle must be
// deterministic: the same fact gives the same actions.
type Handler struct {
	Name   string
	Handle func(fact Fact) ([]Action, error)
}

// Action asks the host to append a fact to an entity of the same tenant;
// the appended fact carries the triggering fact's id as its source_id.
// Data is encoded like NewFact.Data.
type Action struct {
	EntityID string
	Type     string
	Subtype  string
	Data     any
}

// Description implements Plugin.
func (s *Subscription) Description() abi.Description {
	d := abi.Description{ABI: abi.Version, Name: s.Name, Version: s.Version, Kind: abi.KindSubscription, Emits: s.Emits}
	for _, h := range s.Handlers {
		d.Handlers = append(d.Handlers, h.Name)
	}
	return d
}

func (s *Subscription) check() error {
	if err := checkHeader(s.Name, s.Version); err != nil {
		return err
	}
	if len(s.Handlers) == 0 {
		return errors.New("Handlers is empty")
	}
	seen := map[string]bool{}
	for _, h := range s.Handlers {
		switch {
		case h.Name == "":
			return errors.New("a handler has no name")
		case seen[h.Name]:
			return fmt.Errorf("handler %s declared twice", h.Name)
		case h.Handle == nil:
			return fmt.Errorf("handler %s: Handle is nil", h.Name)
		}
		seen[h.Name] = true
	}
	return nil
}

func (s *Subscription) serve(fn export, in []byte, c *call) {
	switch fn {
	case exportDescribe:
		writeDescription(&c.out, s.Description())
	case exportHandle:
		s.handle(in, c)
	default:
		writeError(&c.out, &Error{Status: StatusUnsupported, Code: "unsupported", Message: "a subscription plugin has no ledger calls"})
	}
}

func (s *Subscription) handle(in []byte, c *call) {
	var (
		handler []byte
		fact    Fact
	)
	out := &c.out
	d := &c.dec
	d.reset(in)
	if d.Peek() != '{' {
		writeError(out, errNotObject)
		return
	}
	err := d.Object(func(key []byte) (err error) {
		switch envelopeKeys.find(key) {
		case kHandler:
			handler, err = d.Bytes()
		case kFact:
			err = parseFact(d, &fact, s.Emits)
		default:
			err = d.Skip()
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		writeError(out, inputError(err))
		return
	}
	fact.dec = &c.data
	var h *Handler
	for i := range s.Handlers {
		if equal(handler, s.Handlers[i].Name) {
			h = &s.Handlers[i]
			break
		}
	}
	if h == nil {
		writeError(out, &Error{Status: StatusUnknownCommand, Code: "unknown_command", Message: "subscription " + s.Name + " has no handler " + strconv.Quote(string(handler))})
		return
	}
	actions, err := h.Handle(fact)
	if err != nil {
		writeError(out, asReply(err))
		return
	}
	begin(out)
	out.BeginObject()
	out.Key("actions")
	out.BeginArray()
	for i := range actions {
		a := &actions[i]
		if a.EntityID == "" || a.Type == "" {
			panic(fmt.Sprintf("sdk: handler %s returned an action without entity id or type", h.Name))
		}
		if len(s.Emits) > 0 && !slices.Contains(s.Emits, a.Type) {
			panic(fmt.Sprintf("sdk: handler %s appends a fact of type %q, which the subscription does not declare in Emits", h.Name, a.Type))
		}
		out.BeginObject()
		out.Key("kind")
		out.String(abi.ActionAppend)
		out.Key("entity_id")
		out.String(a.EntityID)
		out.Key("type")
		out.String(a.Type)
		if a.Subtype != "" {
			out.Key("subtype")
			out.String(a.Subtype)
		}
		if a.Data != nil {
			out.Key("data")
			out.Value(a.Data)
		}
		out.EndObject()
	}
	out.EndArray()
	out.EndObject()
	checkEncoded(out)
}
