package main

import (
	"slices"
	"sort"
	"testing"

	"github.com/factline/factline/internal/host/manifest"
)

// domainFacts reads manifests/domain.yaml: the fact types of each entity
// type whose ledger is generic.
func domainFacts(t *testing.T) map[string][]string {
	t.Helper()
	d, err := manifest.LoadDomainFile("../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for name, et := range d.Entities {
		if et.Ledger == Ledger.Name {
			out[name] = et.Facts
		}
	}
	return out
}

// TestServesTheManifestsGenericTypes: the plugin serves exactly the entity
// types manifests/domain.yaml gives to the generic ledger, each with fact
// types to record.
func TestServesTheManifestsGenericTypes(t *testing.T) {
	t.Parallel()
	facts := domainFacts(t)
	var types []string
	for typ, fs := range facts {
		types = append(types, typ)
		if len(fs) == 0 {
			t.Errorf("%s declares no fact types", typ)
		}
	}
	sort.Strings(types)
	if !slices.Equal(types, EntityTypes) {
		t.Fatalf("the manifest gives the generic ledger %v; the plugin serves %v", types, EntityTypes)
	}
}
