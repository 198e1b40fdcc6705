package main

import (
	"slices"
	"testing"

	"github.com/factline/factline/internal/host/manifest"
)

// TestTypesMatchTheDomainManifest keeps the configuration table in step
// with manifests/domain.yaml: the same fact types for each entity type the
// plugin serves.
func TestTypesMatchTheDomainManifest(t *testing.T) {
	t.Parallel()
	d, err := manifest.LoadDomainFile("../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for typ, facts := range Types {
		et, ok := d.Entities[typ]
		if !ok {
			t.Errorf("the manifest does not declare entity type %s", typ)
			continue
		}
		if !slices.Equal(et.Facts, facts) {
			t.Errorf("%s: the manifest declares facts %v, the plugin %v", typ, et.Facts, facts)
		}
	}
}
