package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRepoDomainManifestIsValid(t *testing.T) {
	d, err := LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"account", "asset", "campaign", "contact", "deal", "tool", "user", "vendor"}
	if got := strings.Join(d.EntityTypeNames(), ","); got != strings.Join(want, ",") {
		t.Fatalf("entity types %s, want %s", got, strings.Join(want, ","))
	}
	// Account and asset exactly as the contract's table.
	for _, tc := range []struct {
		typ      string
		slots    map[string]string
		required []string
		facts    string
	}{
		{"account", map[string]string{"status": "ix_s_1", "name": "ix_s_2", "subtype": "ix_s_4", "parent_id": "ix_s_5", "owner_id": "ix_s_6"}, []string{"status", "name", "subtype"}, "deposit,charge,credit,payout,cost"},
		{"asset", map[string]string{"status": "ix_s_1", "name": "ix_s_2", "identifier": "ix_s_3", "subtype": "ix_s_4", "parent_id": "ix_s_5"}, []string{"status", "name", "identifier", "subtype"}, "invocation,outcome"},
	} {
		et := d.Entities[tc.typ]
		if len(et.Fields) != len(tc.slots) {
			t.Errorf("%s has %d fields, want %d", tc.typ, len(et.Fields), len(tc.slots))
		}
		for name, slot := range tc.slots {
			f, ok := et.Field(name)
			if !ok || f.Storage != slot {
				t.Errorf("%s.%s slot %q, want %s", tc.typ, name, f.Storage, slot)
			}
			if f.Required != contains(tc.required, name) {
				t.Errorf("%s.%s required=%v", tc.typ, name, f.Required)
			}
		}
		if got := strings.Join(et.Facts, ","); got != tc.facts {
			t.Errorf("%s facts %s, want %s", tc.typ, got, tc.facts)
		}
	}
}

// TestInvalidDomainManifests checks every file in testdata/domain: its
// first line is "# want: <line>:<col>: <message substring>" (one or more
// such lines), and the parser must report exactly those problems.
func TestInvalidDomainManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/domain/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for _, line := range strings.Split(string(src), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					wants = append(wants, w)
				}
			}
			_, err = ParseDomain(file, src)
			if err == nil {
				t.Fatal("invalid manifest accepted")
			}
			diags := Diagnostics(file, err)
			if len(diags) != len(wants) {
				t.Fatalf("got %d problems, want %d:\n%v", len(diags), len(wants), err)
			}
			for i, w := range wants {
				pos, msg, _ := strings.Cut(w, " ")
				got := diags[i].String()
				if !strings.HasPrefix(got, file+":"+pos+" ") || !strings.Contains(got, msg) {
					t.Errorf("problem %d = %q, want %s at %s", i, got, msg, pos)
				}
			}
		})
	}
}

func FuzzParseDomain(f *testing.F) {
	if src, err := os.ReadFile("../../../manifests/domain.yaml"); err == nil {
		f.Add(src)
	}
	files, _ := filepath.Glob("testdata/domain/*.yaml")
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := ParseDomain("fuzz.yaml", src)
		if err == nil && d == nil {
			t.Fatal("nil domain without error")
		}
		if err != nil {
			checkPositions(t, Diagnostics("fuzz.yaml", err))
		}
	})
}

// TestSubscriptionsOnlyManifest: a manifest may declare subscriptions
// and no entity type, as a layer that adds a subscription plugin's
// subscriptions to the model.
func TestSubscriptionsOnlyManifest(t *testing.T) {
	for _, src := range []string{
		"name: echo\nversion: \"1\"\nsubscriptions:\n  - {name: echo, patterns: [outcome.no_answer], handler: h}\n",
		"name: echo\nversion: \"1\"\nentities: {}\nsubscriptions:\n  - {name: echo, patterns: [outcome.no_answer], handler: h}\n",
	} {
		d, err := ParseDomain("echo.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if len(d.Entities) != 0 || len(d.Subscriptions) != 1 || d.Subscriptions[0].Handler != "h" {
			t.Fatalf("%q: %+v", src, d)
		}
	}
	// So may a manifest of routes alone, for types other layers declare.
	d, err := ParseDomain("routes.yaml", []byte("name: r\nversion: \"1\"\nroutes:\n  - {path: /api/a/:id/s, method: GET, entity: account, action: command, command: budget}\n"))
	if err != nil || len(d.Entities) != 0 || len(d.routes) != 1 {
		t.Fatalf("routes only: %+v %v", d, err)
	}
	if _, err := ParseDomain("none.yaml", []byte("name: none\nversion: \"1\"\n")); err == nil || !strings.Contains(err.Error(), `missing required key "entities"`) {
		t.Fatalf("neither entities nor subscriptions: %v", err)
	}
}
