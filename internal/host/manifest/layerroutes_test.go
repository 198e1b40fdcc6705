package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDomainLayerRoutesAreChecked checks every directory of
// testdata/layerroutes: its domain.yaml is layered over the repository's
// domain manifest and its routes merged after those of its gateway.yaml;
// the problems must be exactly its want.txt (-update rewrites them).
func TestDomainLayerRoutesAreChecked(t *testing.T) {
	dirs, err := filepath.Glob("testdata/layerroutes/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	base := loadRepoDomain(t)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			d, err := LoadLayered(repoDomainFile, base, []string{filepath.Join(dir, "domain.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			gw, err := LoadGatewayFile(filepath.Join(dir, "gateway.yaml"), d)
			if err != nil {
				t.Fatal(err)
			}
			merged, err := LayerRoutes(d, gw)
			if err == nil {
				t.Fatalf("layer routes accepted: %d routes", len(merged.Routes))
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

func TestDomainLayerRoutesFollowTheGatewayRoutes(t *testing.T) {
	t.Parallel()
	layer := []byte(`name: members
version: "1"
entities:
  member: {ledger: loyalty, fields: {}, facts: [earned]}
routes:
  - {path: /api/members, method: POST, entity: member, action: create}
  - {path: /api/members/:id/earn, method: POST, entity: member, action: command, command: earn}
`)
	d, err := LayerSources(repoDomainFile, loadRepoDomain(t), []Source{{File: "domain/members", Src: layer}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := ParseGateway("gw.yaml", []byte("name: g\nversion: \"1\"\nroutes:\n  - {path: /api/accounts/:id, method: GET, entity: account, action: get}\n"), d)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Gateway{gw, nil} {
		out, err := LayerRoutes(d, g)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out.Routes {
			got = append(got, r.File+" "+r.ID()+" "+r.Action+" "+r.Command)
		}
		want := "domain/members POST /api/members create \ndomain/members POST /api/members/:id/earn command earn"
		if g != nil {
			want = "gw.yaml GET /api/accounts/:id get \n" + want
		}
		if strings.Join(got, "\n") != want {
			t.Errorf("routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
		}
	}
	// The base domain carries none: the gateway manifest is returned as is.
	base, _ := ParseDomain(repoDomainFile, loadRepoDomain(t))
	if out, _ := LayerRoutes(base, gw); out != gw {
		t.Error("a domain without routes changed the gateway manifest")
	}
}
