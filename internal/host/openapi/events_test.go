package openapi_test

import (
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/openapi"
)

// TestFactSchemasArePublished: every fact type with a schema has a
// <entity>.<fact>.Data component, used as the data of its emit routes; a
// fact type without one has no component and its data is any object.
func TestFactSchemasArePublished(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	doc := generate(t, gw, domain, goldenOptions)
	schemas := doc.Components.Schemas
	for _, name := range []string{"deposit", "charge", "credit", "payout", "cost"} {
		s := schemas["account."+name+".Data"]
		if s == nil {
			t.Fatalf("no account.%s.Data", name)
		}
		if strings.Join(s.Value.Required, ",") != "amount" || len(s.Value.Properties["amount"].Value.OneOf) != 2 || !s.Value.Properties["currency"].Value.Type.Is("string") {
			t.Errorf("account.%s.Data: %+v", name, s.Value)
		}
	}
	if s := schemas["asset.outcome.Data"]; s == nil || !s.Value.Properties["due_at"].Value.Type.Is("integer") || s.Value.AdditionalProperties.Has == nil || !*s.Value.AdditionalProperties.Has {
		t.Errorf("asset.outcome.Data: %+v", s)
	}
	if s := schemas["contact.note.Data"]; s != nil {
		t.Errorf("a fact type without a schema has a component: %+v", s.Value)
	}
	for _, tc := range []struct{ method, path, ref string }{
		{"POST", "/v1/accounts/{id}/deposits", "#/components/schemas/account.deposit.Data"},
		{"POST", "/v1/assets/{id}/outcomes", "#/components/schemas/asset.outcome.Data"},
	} {
		o := op(t, doc, tc.method, tc.path)
		data := o.RequestBody.Value.Content["application/json"].Schema.Value.Properties["data"]
		if data == nil || data.Ref != tc.ref {
			t.Errorf("%s %s: data %+v, want %s", tc.method, tc.path, data, tc.ref)
		}
	}
	cat, ok := doc.Extensions["x-event-catalog"].(openapi.EventCatalog)
	if !ok || len(cat.EntityTypes) < len(domain.Entities) || cat.EntityTypes[0].Name != "account" || cat.EntityTypes[0].Facts[0].Schema != "#/components/schemas/account.deposit.Data" {
		t.Errorf("x-event-catalog: %+v", doc.Extensions["x-event-catalog"])
	}
}

// TestDocsPageHasTheEventCatalog: /docs lists entity types, their fact
// types and the fields of their data.
func TestDocsPageHasTheEventCatalog(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	page, err := openapi.DocsHTML(generate(t, gw, domain, goldenOptions))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	i := strings.Index(html, `<section id="events">`)
	if i < 0 {
		t.Fatal("no event catalog section")
	}
	section := html[i : i+strings.Index(html[i:], "</section>")]
	for _, want := range []string{`id="events-account"`, "<code>deposit</code>", "<code class=\"pname\">amount</code>", "<code class=\"pname\">due_at</code>", `id="events-contact"`, "any object"} {
		if !strings.Contains(section, want) {
			t.Errorf("event catalog lacks %s", want)
		}
	}
}
