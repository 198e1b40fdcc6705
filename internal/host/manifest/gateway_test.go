package manifest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func repoDomain(t testing.TB) *Domain {
	t.Helper()
	d, err := LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRepoGatewayManifestIsValid(t *testing.T) {
	d := repoDomain(t)
	g, err := LoadGatewayFile("../../../manifests/gateway.yaml", d)
	if err != nil {
		t.Fatal(err)
	}
	// It must exercise every action, both auth modes, both scopes and the
	// public system route.
	seen := map[string]bool{}
	for _, r := range g.Routes {
		seen["action:"+r.Action] = true
		seen["auth:"+r.Auth] = true
		if r.RateLimit != nil {
			seen["scope:"+r.RateLimit.Scope] = true
		}
		if r.Entity == SystemEntity && r.Auth == AuthPublic {
			seen["system"] = true
		}
	}
	for _, want := range []string{"action:emit", "action:get", "action:create", "action:list", "action:query", "auth:api_key", "auth:public", "scope:tenant", "scope:global", "system"} {
		if !seen[want] {
			t.Errorf("manifests/gateway.yaml does not exercise %s", want)
		}
	}
	merged := MergeDomain(d, g)
	ticket := merged.Entities["ticket"]
	if ticket == nil || ticket.Ledger != "builtin" {
		t.Fatalf("declared entity not merged: %+v", ticket)
	}
	if f, _ := ticket.Field("priority"); f.Storage != "ix_n_1" {
		t.Fatalf("indexed number field slot %q", f.Storage)
	}
	if f, _ := ticket.Field("status"); f.Storage != "ix_s_2" {
		t.Fatalf("indexed string field slot %q", f.Storage)
	}
	if merged.Entities["account"] != d.Entities["account"] {
		t.Fatal("merge replaced a domain type")
	}
}

// testLedgers stands for described ledgers: account's commands as its
// plugin describes them, and the built-in ledger, which has none; other
// ledgers are not known.
func testLedgers(name string) ([]LedgerCommand, bool) {
	switch name {
	case "account":
		return []LedgerCommand{{Name: "deposit", Method: "POST"}, {Name: "budget", Method: "GET", ReadOnly: true},
			{Name: "adjust"}, {Name: "append"}}, true
	case "builtin":
		return nil, true
	}
	return nil, false
}

// TestInvalidGatewayManifests pins the diagnostics of every manifest in
// testdata/gateway against its .want golden file (go test -update
// rewrites them). Every manifest must produce at least one problem, each
// with a line and a column.
func TestInvalidGatewayManifests(t *testing.T) {
	d := repoDomain(t)
	files, err := filepath.Glob("testdata/gateway/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("want at least 20 invalid manifests, have %d (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g, err := LoadGatewayFile(file, d)
			if err == nil {
				err = CheckCommands(g, MergeDomain(d, g), testLedgers)
			}
			if err == nil {
				t.Fatal("invalid manifest accepted")
			}
			var lines []string
			for _, diag := range Diagnostics(file, err) {
				if diag.Line < 1 || diag.Column < 1 {
					t.Errorf("problem without a line and column: %s", diag)
				}
				lines = append(lines, diag.String())
			}
			got := strings.Join(lines, "\n") + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".want"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s:\ngot:\n%swant:\n%s", golden, got, want)
			}
		})
	}
}

// TestGatewayFieldTheDomainDoesNotIndex: the domain's declaration of a
// type both declare is the one served, so a field the gateway indexes and
// the domain gives no storage slot could never be filtered on.
func TestGatewayFieldTheDomainDoesNotIndex(t *testing.T) {
	d, err := ParseDomain("d.yaml", []byte("name: d\nversion: \"1\"\nentities:\n  ticket:\n    ledger: builtin\n    fields:\n      subject: {type: string}\n    facts: [opened]\n"))
	if err != nil {
		t.Fatal(err)
	}
	src := "name: g\nversion: \"1\"\nentities:\n  ticket:\n    fields:\n      subject: {type: string, indexed: true}\nroutes: []\n"
	_, err = ParseGateway("g.yaml", []byte(src), d)
	want := "g.yaml:6:16: entities.ticket.fields.subject: indexed here, but the domain manifest gives field subject no storage slot"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestIsGateway(t *testing.T) {
	if !IsGateway([]byte("name: x\nroutes: []\n")) || IsGateway([]byte("name: x\nentities: {}\n")) || IsGateway([]byte(":::")) {
		t.Fatal("IsGateway misclassifies")
	}
	// A domain manifest carrying routes stays a domain manifest.
	if IsGateway([]byte("name: x\nentities:\n  claim: {ledger: builtin}\nroutes: []\n")) || IsGateway([]byte("name: x\nsubscriptions: []\nroutes: []\n")) {
		t.Fatal("a domain manifest with routes taken for a gateway manifest")
	}
	// A duplicated key is the parser's to report, on the right kind.
	if !IsGateway([]byte("name: g\nname: again\nroutes: []\n")) || IsGateway([]byte("name: d\nname: again\nentities:\n  claim: {ledger: builtin}\nroutes: []\n")) {
		t.Fatal("a manifest with a duplicated key misclassified")
	}
}

// TestIsGatewayNearMisses: a top-level key that is a near miss of a
// manifest key counts as that key when telling the kinds apart, so a
// misspelt routes key is reported by the gateway parser, as an unknown
// key, and a misspelt entities or subscriptions key of a domain
// manifest keeps it a domain manifest.
func TestIsGatewayNearMisses(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		gateway   bool
	}{
		{"Routes", "name: g\nversion: \"1\"\nRoutes:\n  - {path: /v1/s, method: GET, entity: system, action: get}\n", true},
		{"ROUTES", "name: g\nROUTES: []\n", true},
		{"route", "name: g\nroute: []\n", true},
		{"rotues", "name: g\nrotues: []\n", true},
		{"Routes beside gateway entities", "name: g\nentities:\n  ticket: {facts: [opened]}\nRoutes: []\n", true},
		{"Routes beside a ledger", "name: d\nentities:\n  claim: {ledger: builtin}\nRoutes: []\n", false},
		{"Entities with a ledger", "name: d\nEntities:\n  claim: {ledger: builtin}\nroutes: []\n", false},
		{"Subscriptions", "name: d\nSubscriptions: []\nroutes: []\n", false},
		{"exact key wins", "name: d\nentities:\n  claim: {ledger: builtin}\nEntities: {}\nroutes: []\n", false},
		{"far from every key", "name: d\npaths: []\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsGateway([]byte(tc.src)); got != tc.gateway {
				t.Fatalf("IsGateway = %v, want %v", got, tc.gateway)
			}
		})
	}
}

// TestPrecheckGateway: checked before the domain model is known, a
// gateway manifest gets the problems it has whatever the domain and none
// a domain manifest could resolve.
func TestPrecheckGateway(t *testing.T) {
	manyIndexed := "name: g\nversion: \"1\"\nentities:\n  account:\n    fields:\n"
	for i := range 9 {
		manyIndexed += fmt.Sprintf("      f%d: {type: string, indexed: true}\n", i)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"a YAML syntax error", "name: g\nversion: \"1\"\nroutes:\n  - {path: /v1/x, method: GET\n",
			"g.yaml:4:5: YAML syntax error: did not find expected ',' or '}'"},
		{"routes not a list", "name: g\nversion: \"1\"\nroutes: {}\n", "g.yaml:3:9: routes must be a list, got a mapping"},
		{"a control character in the name", "name: \"g\\0\"\nversion: \"1\"\nroutes:\n  - {path: /v1/status, method: GET, entity: system, action: get}\n",
			"g.yaml:1:7: manifest.name: control character U+0000 is not allowed"},
		{"a reserved path", "name: g\nversion: \"1\"\nroutes:\n  - {path: /v1/entities/:id, method: GET, entity: account, action: get}\n",
			"g.yaml:4:12: routes[0].path: /v1/entities/:id is under /v1/entities, which the gateway itself serves"},
		// What the domain manifests, stored ones included, may declare.
		{"an entity type the domain declares", "name: g\nversion: \"1\"\nroutes:\n  - {path: /v1/things/:id, method: GET, entity: thing, action: get}\n", ""},
		{"a fact type the domain declares", "name: g\nversion: \"1\"\nroutes:\n  - {path: /v1/things/:id/x, method: POST, entity: thing, action: emit, factType: x}\n", ""},
		{"a type the domain declares with slots", manyIndexed + "routes:\n  - {path: /v1/accounts/:id, method: GET, entity: account, action: get}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := PrecheckGateway("g.yaml", []byte(tc.src))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	// Every problem it finds, the check with the domain finds too.
	d := repoDomain(t)
	files, _ := filepath.Glob("testdata/gateway/*.yaml")
	refused := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		full := map[Diagnostic]bool{}
		_, err = ParseGateway(file, src, d)
		for _, diag := range Diagnostics(file, err) {
			full[diag] = true
		}
		pre := PrecheckGateway(file, src)
		for _, diag := range Diagnostics(file, pre) {
			if !full[diag] {
				t.Errorf("%s: the precheck finds a problem the check with the domain does not: %s", file, diag)
			}
		}
		if pre != nil {
			refused++
		}
	}
	if refused < len(files)/2 {
		t.Errorf("the precheck refuses %d of %d invalid manifests", refused, len(files))
	}
}

func FuzzParseGateway(f *testing.F) {
	for _, glob := range []string{"../../../manifests/gateway.yaml", "testdata/gateway/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src)
			}
		}
	}
	d := repoDomain(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := ParseGateway("fuzz.yaml", src, d)
		if err == nil {
			if g == nil {
				t.Fatal("nil manifest without error")
			}
			MergeDomain(d, g)
			return
		}
		checkPositions(t, Diagnostics("fuzz.yaml", err))
	})
}

// checkPositions fails unless there are problems and each has a line and
// a column.
func checkPositions(t *testing.T, diags []Diagnostic) {
	t.Helper()
	if len(diags) == 0 {
		t.Fatal("error without diagnostics")
	}
	for _, d := range diags {
		if d.Line < 1 || d.Column < 1 {
			t.Fatalf("problem without a line and column: %s", d)
		}
	}
}
