package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const repoDomainFile = "../../../manifests/domain.yaml"

func loadRepoDomain(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile(repoDomainFile)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestConflictingDomainLayersAreRefused checks every directory in
// testdata/layer: its *.yaml files are layered over the repository's
// domain manifest and must be refused with exactly the problems in its
// want.txt (run with -update to rewrite them).
func TestConflictingDomainLayersAreRefused(t *testing.T) {
	dirs, err := filepath.Glob("testdata/layer/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	base := loadRepoDomain(t)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			d, err := LoadLayered(repoDomainFile, base, []string{dir})
			if err == nil {
				t.Fatalf("merged without problems: %v", d.EntityTypeNames())
			}
			var got strings.Builder
			for _, p := range Diagnostics("", err) {
				if p.Line == 0 {
					t.Errorf("problem without a position: %s", p)
				}
				got.WriteString(p.String() + "\n")
			}
			golden := filepath.Join(dir, "want.txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("problems:\n%s\nwant:\n%s", got.String(), want)
			}
		})
	}
}

func TestDomainLayersAddTypesAndFactTypes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := loadRepoDomain(t)
	tickets := write("tickets.yaml", `name: tickets
version: "1"
entities:
  ticket:
    ledger: tickets
    fields:
      status: {type: string, required: true, storage: ix_s_1}
    facts: [opened, closed]
  # Re-declared with its fields as they are: adds one fact type.
  tool:
    ledger: generic
    fields:
      status: {type: string, required: true, storage: ix_s_1, enum: [active, deprecated, disabled]}
      name: {type: string, required: true, storage: ix_s_2}
      category: {type: string, storage: ix_s_3}
      vendor_id: {type: string, storage: ix_s_5}
      unit_cost: {type: number, storage: ix_n_1}
    facts: [invocation, outcome, cost, refund]
`)
	for _, tc := range []struct {
		name    string
		sources []string
	}{
		{"file", []string{tickets}},
		{"directory", []string{dir}},
		// make run passes the base manifest again: a no-op.
		{"base again", []string{repoDomainFile, tickets, repoDomainFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := LoadLayered(repoDomainFile, base, tc.sources)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(d.EntityTypeNames(), "ticket") || len(d.Entities) != 9 {
				t.Fatalf("types %v", d.EntityTypeNames())
			}
			if got := strings.Join(d.Entities["tool"].Facts, ","); got != "invocation,outcome,cost,refund" {
				t.Errorf("tool facts %s", got)
			}
			if d.Name != "factline-domain" || len(d.Subscriptions) != 1 {
				t.Errorf("name %q, subscriptions %v", d.Name, d.Subscriptions)
			}
		})
	}
}

func TestBaseDomainAloneIsUnchanged(t *testing.T) {
	d, err := LoadLayered(repoDomainFile, loadRepoDomain(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Entities) != 8 {
		t.Fatalf("types %v", d.EntityTypeNames())
	}
}
