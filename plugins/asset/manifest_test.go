package main

import (
	"slices"
	"testing"

	"github.com/factline/factline/internal/host/manifest"
)

// TestFactTypesMatchTheDomainManifest: the ledger records exactly the fact
// types manifests/domain.yaml declares for asset.
func TestFactTypesMatchTheDomainManifest(t *testing.T) {
	t.Parallel()
	d, err := manifest.LoadDomainFile("../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Entities["asset"].Facts; !slices.Equal(got, Ledger.Emits) {
		t.Fatalf("the manifest declares %v, the plugin emits %v", got, Ledger.Emits)
	}
}
