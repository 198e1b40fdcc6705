package webhook

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/manifest"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the fact data table of README.md from manifests/domain.yaml")

const (
	factDataBegin = "<!-- fact-data: generated from manifests/domain.yaml by TestReadmeFactDataMatchesDomain -->\n"
	factDataEnd   = "<!-- fact-data: end -->\n"
)

// TestReadmeFactDataMatchesDomain: the README's table of what fact.data
// holds per trigger is the built-in domain's fact schemas, so it cannot
// drift from them (run with -update-readme to rewrite it).
func TestReadmeFactDataMatchesDomain(t *testing.T) {
	d, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(src)
	i, j := strings.Index(readme, factDataBegin), strings.Index(readme, factDataEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q ... %q markers", factDataBegin, factDataEnd)
	}
	want := factDataTable(d)
	got := readme[i+len(factDataBegin) : j]
	if *updateReadme {
		readme = readme[:i+len(factDataBegin)] + want + readme[j:]
		if err := os.WriteFile("README.md", []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Errorf("README.md fact data table differs from the domain manifest (run go test ./internal/host/webhook -run TestReadmeFactDataMatchesDomain -update-readme):\n%s\nwant:\n%s", got, want)
	}
}

// factDataTable renders one row per fact type with a schema.
func factDataTable(d *manifest.Domain) string {
	var b strings.Builder
	b.WriteString("| Trigger | Entity type | `fact.data` |\n|---|---|---|\n")
	for _, name := range d.EntityTypeNames() {
		t := d.Entities[name]
		for _, fact := range t.Facts {
			s := t.FactSchema(fact)
			if s == nil {
				continue
			}
			var members []string
			for _, f := range s.Fields {
				m := fmt.Sprintf("`%s` %s", f.Name, f.Type)
				if f.Required {
					m += ", required"
				}
				if len(f.Enum) > 0 {
					m += ", one of " + strings.Join(f.Enum, ", ")
				}
				if f.Description != "" {
					m += ": " + strings.TrimSuffix(f.Description, ".")
				}
				members = append(members, m)
			}
			if s.AdditionalFields {
				members = append(members, "other members as sent")
			} else {
				members = append(members, "nothing else")
			}
			fmt.Fprintf(&b, "| `%s.<subtype>` | %s | %s |\n", fact, name, strings.Join(members, "; "))
		}
	}
	return b.String()
}
