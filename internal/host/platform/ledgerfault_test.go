package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
)

// faulty decides, per command, a fact that breaks the plugin contract in
// one way, as a buggy ledger plugin would.
type faulty struct{}

func (faulty) Name() string         { return "faulty" }
func (faulty) StateDependent() bool { return false }
func (faulty) Decide(_ context.Context, _ json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	nf := ledger.NewFact{Type: "poked", Data: json.RawMessage(`{"n":1}`)}
	switch cmd.Name {
	case "number":
		nf.Data = json.RawMessage(`5`)
	case "bytes": // a []byte the SDK marshalled as base64
		nf.Data = json.RawMessage(` "eyJhIjoxfQ=="`)
	case "list":
		nf.Data = json.RawMessage(`[{"a":1}]`)
	case "before_epoch":
		nf.Timestamp = -5
	case "after_9999":
		nf.Timestamp = platform.MaxFactTime + 1
	case "undeclared":
		nf.Type = "shoved"
	case "null":
		nf.Data = json.RawMessage(`null`)
	}
	return ledger.Decision{Facts: []ledger.NewFact{nf}}, nil
}
func (faulty) Evolve(_ context.Context, state, _ json.RawMessage) (json.RawMessage, error) {
	return state, nil
}

// TestLedgerFaultsAreRefusedAsTheLedgers: a decided fact whose data is not
// an object, whose timestamp is before the epoch, or whose type the
// entity type does not declare is recorded nowhere and answered as a 500
// naming the ledger (the client did nothing wrong); data null is {}.
func TestLedgerFaultsAreRefusedAsTheLedgers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc := serviceWith(t, backend, "name: test\nversion: \"1\"\nentities:\n  probe:\n    ledger: faulty\n    fields: {}\n    facts: [poked]\n", faulty{})
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "probe", ID: "p1"})
		if err != nil {
			t.Fatal(err)
		}
		for cmd, want := range map[string]string{
			"number":       "decided a poked fact whose data is not a JSON object",
			"bytes":        "decided a poked fact whose data is not a JSON object",
			"list":         "decided a poked fact whose data is not a JSON object",
			"before_epoch": "decided a poked fact with timestamp -5, before the epoch",
			"after_9999":   "decided a poked fact with timestamp 253402300800000, after the year 9999",
			"undeclared":   `decided fact type "shoved", which entity type probe does not declare`,
		} {
			_, err := svc.RunCommand(ctx, "t1", e.ID, cmd, json.RawMessage(`{}`), platform.Provenance{})
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Kind != problem.Internal || !strings.Contains(pe.Detail, "Ledger faulty "+want) {
				t.Errorf("%s: %v, want an internal problem saying %q", cmd, err, want)
			}
		}
		assertNoFacts(t, svc, e.ID)
		// While a stored change of the model is not applied here, an
		// undeclared fact type may be the change's: a 503 to retry.
		behind, err := platform.New(platform.Options{Store: svc.Store(), Domain: svc.Domain(), Ledgers: ledger.Static{"faulty": faulty{}}, ModelBehind: func() bool { return true }})
		if err != nil {
			t.Fatal(err)
		}
		defer behind.Close()
		_, err = behind.RunCommand(ctx, "t1", e.ID, "undeclared", json.RawMessage(`{}`), platform.Provenance{})
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Kind != problem.Unavailable || pe.Headers["Retry-After"] != "2" || !strings.Contains(pe.Detail, "Fact type shoved is not declared for entity type probe here yet") {
			t.Errorf("undeclared fact type with the model behind: %v, want a 503 to retry", err)
		}
		// So is a raw fact of that type.
		_, err = behind.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: "shoved"})
		if !errors.As(err, &pe) || pe.Kind != problem.Unavailable || pe.Headers["Retry-After"] != "2" {
			t.Errorf("raw fact of an undeclared type with the model behind: %v, want a 503 to retry", err)
		}
		assertNoFacts(t, svc, e.ID)
		out, err := svc.RunCommand(ctx, "t1", e.ID, "null", json.RawMessage(`{}`), platform.Provenance{})
		if err != nil || len(out.Facts) != 1 || string(out.Facts[0].Data) != "{}" {
			t.Fatalf("data null: %+v %v, want one fact with data {}", out, err)
		}
	})
}

// rotten decides, per command, fact data the store cannot hold, and its
// evolve a state the store cannot hold when the fact's data says so.
type rotten struct{}

func (rotten) Name() string         { return "rotten" }
func (rotten) StateDependent() bool { return true }
func (rotten) Decide(_ context.Context, _ json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	data := map[string]string{
		"nul":       `{"x":"a\u0000b"}`,
		"bad_utf8":  "{\"x\":\"\xff\"}",
		"dup_key":   `{"x":1,"x":2}`,
		"big":       `{"x":1e999}`,
		"amplified": `{"x":[` + strings.Repeat("1e99,", 45_000) + `1]}`,
		"state":     `{"rot":true}`,
	}[cmd.Name]
	return ledger.Decision{Facts: []ledger.NewFact{{Type: "poked", Data: json.RawMessage(data)}}}, nil
}
func (rotten) Evolve(_ context.Context, state, fact json.RawMessage) (json.RawMessage, error) {
	if strings.Contains(string(fact), `"rot":true`) {
		return json.RawMessage(`{"s":"a\u0000b"}`), nil
	}
	return state, nil
}

// TestUnstorableDecisionsAreTheLedgers: fact data or a state a ledger
// made that the store cannot hold (a NUL, invalid UTF-8, a duplicate
// member, a number out of range, data that written out exceeds the
// decision's bound) is a 500 naming the ledger and records nothing; it
// had been a 400 naming fields the client never sent.
func TestUnstorableDecisionsAreTheLedgers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc := serviceWith(t, backend, "name: test\nversion: \"1\"\nentities:\n  probe:\n    ledger: rotten\n    fields: {}\n    facts: [poked]\n", rotten{})
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "probe", ID: "p1"})
		if err != nil {
			t.Fatal(err)
		}
		for cmd, want := range map[string]string{
			"nul":       "decided a poked fact whose data.x must not contain NUL characters",
			"bad_utf8":  "decided a poked fact whose data.x must be valid UTF-8",
			"dup_key":   "decided a poked fact whose data.x appears more than once in its object",
			"big":       "decided a poked fact whose data.x is out of range",
			"amplified": "decided facts whose data, numbers written out, exceeds 4194304 bytes",
			"state":     "evolved a state whose state.s must not contain NUL characters",
		} {
			_, err := svc.RunCommand(ctx, "t1", e.ID, cmd, json.RawMessage(`{}`), platform.Provenance{})
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Kind != problem.Internal || !strings.Contains(pe.Detail, "Ledger rotten "+want) {
				t.Errorf("%s: %v, want an internal problem saying %q", cmd, err, want)
			}
		}
		assertNoFacts(t, svc, e.ID)
	})
}

// stuck decides a fact and fails to evolve it, as the command says: its
// plugin's deadline, or a refusal.
type stuck struct{}

func (stuck) Name() string         { return "stuck" }
func (stuck) StateDependent() bool { return true }
func (stuck) Decide(_ context.Context, _ json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	return ledger.Decision{Facts: []ledger.NewFact{{Type: "poked", Data: json.RawMessage(`{"how":"` + cmd.Name + `"}`)}}}, nil
}
func (stuck) Evolve(_ context.Context, _, fact json.RawMessage) (json.RawMessage, error) {
	if strings.Contains(string(fact), `"how":"deadline"`) {
		return nil, problem.Wrap(problem.Timeout, "The stuck plugin did not answer within its deadline", context.DeadlineExceeded)
	}
	return nil, &ledger.BusinessError{Code: "nope", Message: "will not"}
}

// TestEvolveFailuresNameTheLedger: a plugin's evolve running out of its
// deadline while a write records is the 504 naming the plugin (it had
// been the generic "took too long"), and an evolve refusing the fact its
// own decide made is the ledger's fault, not a 422 for the client.
func TestEvolveFailuresNameTheLedger(t *testing.T) {
	svc := serviceWith(t, "sqlite", "name: test\nversion: \"1\"\nentities:\n  probe:\n    ledger: stuck\n    fields: {}\n    facts: [poked]\n", stuck{})
	ctx := context.Background()
	e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "probe", ID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	var pe *problem.Error
	_, err = svc.RunCommand(ctx, "t1", e.ID, "deadline", json.RawMessage(`{}`), platform.Provenance{})
	if !errors.As(err, &pe) || pe.Kind != problem.Timeout || pe.Detail != "The stuck plugin did not answer within its deadline" {
		t.Errorf("evolve past its deadline: %v", err)
	}
	_, err = svc.RunCommand(ctx, "t1", e.ID, "refuse", json.RawMessage(`{}`), platform.Provenance{})
	if !errors.As(err, &pe) || pe.Kind != problem.Internal || !strings.Contains(pe.Detail, "Ledger stuck refused to evolve the fact it decided: will not") {
		t.Errorf("evolve refusing: %v", err)
	}
	assertNoFacts(t, svc, e.ID)
}
