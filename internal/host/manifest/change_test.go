package manifest_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/sqlite"
)

const ticketsV1 = `name: tickets
version: "1"
entities:
  ticket:
    ledger: generic
    fields:
      status: {type: string, required: true, storage: ix_s_1}
      title: {type: string, storage: ix_s_2}
      hours: {type: number, storage: ix_n_1}
    facts: [opened, closed]
`

// TestDomainChangesAreCheckedAgainstStoredData: one stored ticket (status
// and title set, one "opened" fact) and each change of the model.
func TestDomainChangesAreCheckedAgainstStoredData(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "factline.db"), sqlite.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	open := "open"
	title := "printer jam"
	e := &store.Entity{TenantID: "t1", ID: "tk1", Type: "ticket", Data: json.RawMessage(`{"status":"open","title":"printer jam"}`), CreatedAt: 1, UpdatedAt: 1}
	e.Slots.S[0], e.Slots.S[1] = &open, &title
	if err := st.CreateEntity(ctx, e); err != nil {
		t.Fatal(err)
	}
	res, err := st.AppendFacts(ctx, []store.Append{{Fact: store.Fact{ID: "f1", TenantID: "t1", EntityID: "tk1", Type: "opened", Timestamp: 1, Data: json.RawMessage(`{}`), CreatedAt: 1}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	cur := parse(t, ticketsV1)
	env := manifest.ChangeEnv{Usage: st, LedgerInstalled: func(_ context.Context, name string) (bool, error) {
		return name == "generic" || name == "tickets", nil
	}}
	edit := func(pairs ...string) string { return strings.NewReplacer(pairs...).Replace(ticketsV1) }
	for _, tc := range []struct {
		name string
		next string
		want string // "" when accepted
	}{
		{"unchanged", ticketsV1, ""},
		{"adds a fact type", edit("[opened, closed]", "[opened, closed, merged]"), ""},
		{"adds a type", ticketsV1 + "  asset_tag:\n    ledger: tickets\n    fields: {}\n    facts: [scanned]\n", ""},
		{"retypes a field without data", edit("hours: {type: number", "hours: {type: integer"), ""},
		{"removes a fact type no fact has", edit("[opened, closed]", "[opened]"), ""},
		{"retypes a field with data", edit("title: {type: string, storage: ix_s_2}", "title: {type: number, storage: ix_n_2}"),
			"new:8:7: entities.ticket.fields.title: retypes field from string to number, which 1 stored entities have\n" +
				"new:4:3: entities.ticket: slot ix_s_2 holds values of 1 stored entities, and no field is declared on it"},
		{"removes a fact type in use", edit("[opened, closed]", "[closed]"),
			`new:4:3: entities.ticket.facts: removes fact type "opened", which facts of stored entities have`},
		{"names a missing ledger", edit("ledger: generic", "ledger: nowhere"),
			`new:4:3: entities.ticket.ledger: no built-in ledger or installed plugin is named "nowhere"`},
		{"removes a type with entities", "name: other\nversion: \"1\"\nentities:\n  other: {ledger: generic, fields: {}, facts: [x]}\n",
			`cur:4:3: entities.ticket: removes an entity type 1 stored entities have`},
		{"requires a field entities lack", edit("hours: {type: number,", "hours: {type: number, required: true,"),
			`new:9:7: entities.ticket.fields.hours: required, but 1 of 1 stored entities lack it`},
		{"reuses a slot with data", edit("title: {type: string, storage: ix_s_2}", "title: {type: string, storage: ix_s_3}\n      summary: {type: string, storage: ix_s_2}"),
			"new:8:7: entities.ticket.fields.title: moves field from slot \"ix_s_2\" to \"ix_s_3\", which 1 stored entities fill\n" +
				`new:9:7: entities.ticket.fields.summary: reuses slot ix_s_2, which holds field "title" of 1 stored entities`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := manifest.CheckChange(ctx, cur, parseAs(t, "new", tc.next), env)
			if g := errString(err); g != tc.want {
				t.Errorf("problems:\n%s\nwant:\n%s", g, tc.want)
			}
		})
	}
	// A type dropped and declared again: its slots must still mean what
	// the stored data says.
	t.Run("declares a dropped type with another slot layout", func(t *testing.T) {
		empty := parseAs(t, "cur", "name: x\nversion: \"1\"\nentities:\n  other: {ledger: generic, fields: {}, facts: [x]}\n")
		next := parseAs(t, "new", edit("title: {type: string, storage: ix_s_2}", "title: {type: string}\n      summary: {type: string, storage: ix_s_2}"))
		err := manifest.CheckChange(ctx, empty, next, env)
		want := `new:9:7: entities.ticket.fields.summary: slot ix_s_2 holds values of 1 stored entities, but only 0 have field "summary"`
		if got := errString(err); got != want {
			t.Errorf("problems:\n%s\nwant:\n%s", got, want)
		}
	})
}

func errString(err error) string {
	var got []string
	for _, d := range manifest.Diagnostics("", err) {
		got = append(got, d.String())
	}
	return strings.Join(got, "\n")
}

func parse(t *testing.T, src string) *manifest.Domain { return parseAs(t, "cur", src) }

func parseAs(t *testing.T, file, src string) *manifest.Domain {
	t.Helper()
	d, err := manifest.ParseDomain(file, []byte(src))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

const ticketsSchemaV1 = `name: tickets
version: "1"
entities:
  ticket:
    ledger: generic
    fields:
      status: {type: string, required: true, storage: ix_s_1}
    facts:
      opened:
        fields:
          title: {type: string}
          hours: {type: number}
          note: {type: string}
`

// TestFactSchemaChangesAreCheckedAgainstStoredFacts: one stored "opened"
// fact with title and hours, and each change of its schema.
func TestFactSchemaChangesAreCheckedAgainstStoredFacts(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "factline.db"), sqlite.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	open := "open"
	e := &store.Entity{TenantID: "t1", ID: "tk1", Type: "ticket", Data: json.RawMessage(`{"status":"open"}`), CreatedAt: 1, UpdatedAt: 1}
	e.Slots.S[0] = &open
	if err := st.CreateEntity(ctx, e); err != nil {
		t.Fatal(err)
	}
	res, err := st.AppendFacts(ctx, []store.Append{{Fact: store.Fact{ID: "f1", TenantID: "t1", EntityID: "tk1", Type: "opened", Timestamp: 1, Data: json.RawMessage(`{"title":"jam","hours":2}`), CreatedAt: 1}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	cur := parse(t, ticketsSchemaV1)
	env := manifest.ChangeEnv{Usage: st, LedgerInstalled: func(context.Context, string) (bool, error) { return true, nil }}
	edit := func(pairs ...string) string { return strings.NewReplacer(pairs...).Replace(ticketsSchemaV1) }
	for _, tc := range []struct {
		name string
		next string
		want string // "" when accepted
	}{
		{"unchanged", ticketsSchemaV1, ""},
		{"adds a field", edit("note: {type: string}", "note: {type: string}\n          due: {type: integer}"), ""},
		{"retypes a field no fact has", edit("note: {type: string}", "note: {type: object}"), ""},
		{"removes a field no fact has", edit("          note: {type: string}\n", ""), ""},
		{"drops the schema", edit("      opened:\n        fields:\n          title: {type: string}\n          hours: {type: number}\n          note: {type: string}\n", "      opened: {}\n"), ""},
		{"retypes a field with data", edit("hours: {type: number}", "hours: {type: string}"),
			"new:12:11: entities.ticket.facts.opened.fields.hours: retypes field from number to string, which 1 stored facts have"},
		{"removes a field with data", edit("          title: {type: string}\n", ""),
			`new:9:7: entities.ticket.facts.opened: removes field "title", which 1 stored facts have`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := manifest.CheckChange(ctx, cur, parseAs(t, "new", tc.next), env)
			if g := errString(err); g != tc.want {
				t.Errorf("problems:\n%s\nwant:\n%s", g, tc.want)
			}
		})
	}
}

// TestGatewayTypeChangesNameTheirPlace: a change of a type a gateway
// manifest declares, refused for the stored data, is reported at its
// file, line and column (the problems had none: ": entities.widget: ...").
func TestGatewayTypeChangesNameTheirPlace(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "factline.db"), sqlite.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateEntity(ctx, &store.Entity{TenantID: "t1", ID: "w1", Type: "widget", Data: json.RawMessage(`{"label":"x"}`), CreatedAt: 1, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	d := parse(t, ticketsV1)
	dir := t.TempDir()
	load := func(name, fields string) (*manifest.Gateway, string) {
		file := filepath.Join(dir, name)
		src := "name: widgets\nversion: \"1\"\nentities:\n  widget:\n    fields: " + fields + "\n    facts: [made]\nroutes:\n  - {path: /widgets/:id, method: GET, entity: widget, action: get}\n"
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := manifest.LoadGatewayFile(file, d)
		if err != nil {
			t.Fatal(err)
		}
		return g, file
	}
	g1, _ := load("v1.yaml", "{label: {type: string}}")
	g2, file := load("v2.yaml", "{label: {type: number}}")
	env := manifest.ChangeEnv{Usage: st, LedgerInstalled: func(context.Context, string) (bool, error) { return true, nil }}
	err = manifest.CheckChange(ctx, manifest.MergeDomain(d, g1), manifest.MergeDomain(d, g2), env)
	if err == nil {
		t.Fatal("retyping a field stored entities hold was accepted")
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, file+":5:") && !strings.HasPrefix(line, file+":4:") {
			t.Errorf("problem not placed in %s at the type's lines: %q", file, line)
		}
	}
}
