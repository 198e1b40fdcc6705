package manifest

import (
	"strings"
	"testing"
)

func TestFactTypesAreListedOrDeclaredWithSchemas(t *testing.T) {
	d, err := ParseDomain("d.yaml", []byte(`name: d
version: "1"
entities:
  ticket:
    ledger: generic
    fields: {}
    facts:
      opened:
        description: A ticket was opened.
        fields:
          title: {type: string, required: true, description: What is wrong.}
          priority: {type: integer, enum: [1, 2, 3]}
          cost: {type: decimal}
          tags: {type: array}
      noted: {description: Free-form.}
      closed:
        additionalFields: true
        fields:
          reason: {type: string, enum: [fixed, wontfix]}
  note:
    ledger: generic
    fields: {}
    facts: [added]
`))
	if err != nil {
		t.Fatal(err)
	}
	tk := d.Entities["ticket"]
	if got := strings.Join(tk.Facts, ","); got != "opened,noted,closed" {
		t.Fatalf("facts %s", got)
	}
	opened := tk.FactSchema("opened")
	if opened == nil || opened.AdditionalFields || len(opened.Fields) != 4 {
		t.Fatalf("opened schema %+v", opened)
	}
	if f, _ := opened.Field("title"); f.Type != TypeString || !f.Required || f.Description != "What is wrong." {
		t.Errorf("title %+v", f)
	}
	if f, _ := opened.Field("priority"); strings.Join(f.Enum, ",") != "1,2,3" {
		t.Errorf("priority %+v", f)
	}
	if tk.FactSchema("noted") != nil || tk.FactType("noted").Description != "Free-form." {
		t.Errorf("noted %+v", tk.FactType("noted"))
	}
	if s := tk.FactSchema("closed"); s == nil || !s.AdditionalFields {
		t.Errorf("closed %+v", s)
	}
	if n := d.Entities["note"]; n.FactSchema("added") != nil || !n.AllowsFact("added") {
		t.Errorf("listed fact type %+v", n.FactType("added"))
	}
}

func TestLayerKeepsFactSchemasAndAddsFactTypes(t *testing.T) {
	base, err := ParseDomain("base.yaml", []byte("name: b\nversion: \"1\"\nentities:\n  ticket:\n    ledger: generic\n    fields: {}\n    facts:\n      opened: {fields: {title: {type: string}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := ParseDomain("l.yaml", []byte("name: l\nversion: \"1\"\nentities:\n  ticket:\n    ledger: generic\n    fields: {}\n    facts:\n      opened: {fields: {title: {type: string}}}\n      closed: {fields: {reason: {type: string}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	byName, err := ParseDomain("n.yaml", []byte("name: n\nversion: \"1\"\nentities:\n  ticket:\n    ledger: generic\n    fields: {}\n    facts: [opened, closed, merged]\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Layer(base, layer, byName)
	if err != nil {
		t.Fatal(err)
	}
	tk := d.Entities["ticket"]
	if got := strings.Join(tk.Facts, ","); got != "opened,closed,merged" {
		t.Fatalf("facts %s", got)
	}
	if tk.FactSchema("opened") == nil || tk.FactSchema("closed") == nil || tk.FactSchema("merged") != nil {
		t.Errorf("schemas opened %v closed %v merged %v", tk.FactSchema("opened"), tk.FactSchema("closed"), tk.FactSchema("merged"))
	}
	if base.Entities["ticket"].FactType("closed") != nil {
		t.Error("layering changed the base")
	}
}
