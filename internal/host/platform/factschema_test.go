package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
)

const schemaDomainYAML = `
name: test
version: "1"
entities:
  ticket:
    ledger: builtin
    fields: {}
    facts:
      opened:
        fields:
          title: {type: string, required: true}
          priority: {type: integer, enum: [1, 2, 3]}
          cost: {type: decimal}
          tags: {type: array}
          meta: {type: object}
          urgent: {type: boolean}
      closed:
        additionalFields: true
        fields:
          reason: {type: string, enum: [fixed, wontfix]}
      noted: {description: Any object.}
      merged: {}
  meter:
    ledger: maker
    fields: {}
    facts:
      reading:
        fields:
          value: {type: number, required: true}
`

// maker records a reading whose data is the command's input, as a plugin
// that copies its input into the fact would.
type maker struct{}

func (maker) Name() string         { return "maker" }
func (maker) StateDependent() bool { return false }
func (maker) Decide(_ context.Context, _ json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	return ledger.Decision{Facts: []ledger.NewFact{{Type: "reading", Data: cmd.Input}}}, nil
}
func (maker) Evolve(_ context.Context, state, _ json.RawMessage) (json.RawMessage, error) {
	return state, nil
}

func newSchemaService(t *testing.T, backend string) *platform.Service {
	t.Helper()
	return serviceWith(t, backend, schemaDomainYAML, maker{})
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := platform.DecodeObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fieldErrors renders a problem's field errors as "field code" lines.
func fieldErrors(t *testing.T, err error, kind problem.Kind) []string {
	t.Helper()
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Kind != kind {
		t.Fatalf("error %v, want %s", err, kind.Slug)
	}
	var out []string
	for _, e := range pe.Errors {
		out = append(out, e.Field+" "+e.Code)
	}
	return out
}

func assertNoFacts(t *testing.T, svc *platform.Service, entityID string) {
	t.Helper()
	page, err := svc.ListEntityFacts(context.Background(), "t1", entityID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 0 {
		t.Fatalf("%d facts stored, want none", len(page.Items))
	}
}

func TestFactBreakingItsSchemaIsRefusedWithEveryFieldError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc := newSchemaService(t, backend)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "ticket", ID: "tk1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, typ, data string
			want            []string
		}{
			{"every field wrong", "opened", `{"priority":7,"cost":"12.5.0","tags":{},"meta":[],"urgent":"yes","colour":"red"}`, []string{
				"data.colour unknown_field", "data.cost type", "data.meta type", "data.priority enum",
				"data.tags type", "data.title required", "data.urgent type"}},
			{"wrong types", "opened", `{"title":5,"priority":1.5,"cost":true}`, []string{"data.cost type", "data.priority type", "data.title type"}},
			{"null required field", "opened", `{"title":null}`, []string{"data.title required"}},
			{"enum of a type allowing other fields", "closed", `{"reason":"later","by":"me"}`, []string{"data.reason enum"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: tc.typ, Data: decode(t, tc.data)})
				got := fieldErrors(t, err, problem.ValidationFailed)
				if len(got) != len(tc.want) {
					t.Fatalf("errors %q, want %q", got, tc.want)
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Errorf("errors %q, want %q", got, tc.want)
						break
					}
				}
			})
		}
		assertNoFacts(t, svc, e.ID)
	})
}

func TestFactFittingItsSchemaIsStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc := newSchemaService(t, backend)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "ticket", ID: "tk1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ typ, data string }{
			{"opened", `{"title":"jam","priority":2,"cost":"0.10","tags":["a"],"meta":{"k":1},"urgent":false}`},
			{"opened", `{"title":"jam","priority":3,"cost":12.345678901234567891}`},
			{"opened", `{"title":"jam","cost":null}`},
			{"closed", `{"reason":"fixed","by":"me"}`},
		} {
			f, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: tc.typ, Data: decode(t, tc.data)})
			if err != nil {
				t.Fatalf("%s %s: %v", tc.typ, tc.data, err)
			}
			if string(f.Data) == "" || f.Type != tc.typ {
				t.Fatalf("stored %+v", f)
			}
		}
		// The decimal keeps every digit.
		page, err := svc.ListEntityFacts(ctx, "t1", e.ID, "", 0)
		if err != nil || len(page.Items) != 4 {
			t.Fatalf("facts %v, %v", page, err)
		}
		if got := decode(t, string(page.Items[1].Data))["cost"]; got != json.Number("12.345678901234567891") {
			t.Errorf("cost stored as %v", got)
		}
	})
}

func TestFactTypeWithoutSchemaAcceptsAnyObject(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc := newSchemaService(t, backend)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "ticket", ID: "tk1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []string{"noted", "merged"} {
			if _, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: typ, Data: decode(t, `{"title":5,"anything":{"at":["all"]}}`)}); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
		}
	})
}

// TestLedgerDecidedFactBreakingItsSchemaIsUnprocessable: a fact a ledger
// decides is checked too; one that does not fit is refused (422, every
// field error) and nothing is stored.
func TestLedgerDecidedFactBreakingItsSchemaIsUnprocessable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc := newSchemaService(t, backend)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "meter", ID: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.RunCommand(ctx, "t1", e.ID, "read", json.RawMessage(`{"value":"high","unit":"C"}`), platform.Provenance{})
		got := fieldErrors(t, err, problem.Unprocessable)
		if want := "data.unit unknown_field,data.value type"; len(got) != 2 || got[0]+","+got[1] != want {
			t.Errorf("errors %q, want %s", got, want)
		}
		assertNoFacts(t, svc, e.ID)
		if _, err := svc.RunCommand(ctx, "t1", e.ID, "read", json.RawMessage(`{"value":21.5}`), platform.Provenance{}); err != nil {
			t.Fatalf("fitting reading: %v", err)
		}
	})
}
