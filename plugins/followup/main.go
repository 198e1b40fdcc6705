// Command followup is a subscription plugin. Its handler
// no_answer_followup reacts to outcome facts with subtype no_answer (the
// domain manifest routes the pattern outcome.no_answer to it) by
// scheduling a follow-up on the same entity: it appends an outcome fact
// with subtype followup_scheduled and the data
//
//	{"reason":"no_answer","source_fact_id":"fct_...","due_at":<fact time + 24h>,"contact_id":"..."}
//
// (contact_id only when the triggering fact's data names one). The effect
// is observable in the entity's facts and, for an asset, in its stats
// (outcome_counts.followup_scheduled). The host applies each action once
// per triggering fact, so a fact delivered twice schedules one follow-up.
// Facts of other types or subtypes get no action.
package main

import (
	"github.com/factline/factline/sdk"
)

func main() {}

func init() { sdk.Register(Subscription) }

// FollowUpAfter is how long after the unanswered attempt the follow-up is
// due, in ms.
const FollowUpAfter = 24 * 60 * 60 * 1000

// Subscription is the plugin.
var Subscription = &sdk.Subscription{
	Name:     "followup",
	Version:  "1.0.0",
	Emits:    []string{"outcome"},
	Handlers: []sdk.Handler{{Name: "no_answer_followup", Handle: noAnswerFollowup}},
}

func noAnswerFollowup(f sdk.Fact) ([]sdk.Action, error) {
	if f.Type != "outcome" || f.Subtype != "no_answer" || f.EntityID == "" {
		return nil, nil
	}
	var in outcomeData
	_ = f.Decode(&in) // data without a usable contact_id still gets a follow-up
	return []sdk.Action{{
		EntityID: f.EntityID,
		Type:     "outcome",
		Subtype:  "followup_scheduled",
		Data:     FollowUp{Reason: "no_answer", SourceFactID: f.ID, DueAt: f.Timestamp + FollowUpAfter, ContactID: in.ContactID},
	}}, nil
}

// outcomeData is what the handler reads of the no_answer outcome's data.
type outcomeData struct{ ContactID string }

// DecodeJSON implements sdk.Decodable.
func (o *outcomeData) DecodeJSON(d *sdk.Decoder) error {
	return d.Object(func(key []byte) (err error) {
		if string(key) == "contact_id" && d.Peek() == '"' {
			o.ContactID, err = d.String()
			return err
		}
		return d.Skip()
	})
}

// FollowUp is the data of a followup_scheduled outcome.
type FollowUp struct {
	Reason       string
	SourceFactID string
	DueAt        int64 // ms since the epoch
	ContactID    string
}

// EncodeJSON implements sdk.Encodable.
func (f FollowUp) EncodeJSON(e *sdk.Encoder) {
	e.BeginObject()
	e.Key("reason")
	e.String(f.Reason)
	e.Key("source_fact_id")
	e.String(f.SourceFactID)
	e.Key("due_at")
	e.Int(f.DueAt)
	if f.ContactID != "" {
		e.Key("contact_id")
		e.String(f.ContactID)
	}
	e.EndObject()
}
