package app_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/host/app"
	"github.com/factline/factline/host/manifest"
)

const claimsLayer = `name: claims
version: "1"
entities:
  claim:
    ledger: builtin
    fields:
      status: {type: string, required: true, storage: ix_s_1}
      amount: {type: number, storage: ix_n_1}
    facts: [filed, paid]
`

// writeAtomic replaces a file by renaming, so a watcher never reads half
// of it.
func writeAtomic(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestWatchedDomainDirectoryAddsAnEntityType: a domain manifest written
// into a --domain directory under --watch adds its entity type without a
// restart; until then the type is unknown.
func TestWatchedDomainDirectoryAddsAnEntityType(t *testing.T) {
	dir := t.TempDir()
	domains := filepath.Join(dir, "domains")
	os.Mkdir(domains, 0o755)
	l := startLive(t, "sqlite", filepath.Join(dir, "data"), func(c *app.Config) {
		c.Domains, c.Watch = []string{domains}, true
	})
	claim := map[string]any{"type": "claim", "id": "c1", "status": "open", "amount": 12.5}
	if code, body := l.call("POST", "/v1/entities", l.key, claim); code != 400 {
		t.Fatalf("claim before its manifest: %d %v", code, body)
	}
	writeAtomic(t, filepath.Join(domains, "claims.yaml"), claimsLayer)
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := l.call("POST", "/v1/entities", l.key, claim)
		if code == 201 {
			break
		}
		if code != 400 || time.Now().After(deadline) {
			t.Fatalf("claim after its manifest: %d %v", code, body)
		}
		time.Sleep(50 * time.Millisecond) // polling the watcher, not ordering
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
		t.Fatalf("fact on the new type: %d %v", code, body)
	}
}

// TestRefusedDomainChangeKeepsTheOldModel: changes that would retype a
// field with data, remove a fact type in use or name a missing ledger are
// refused whole with file:line:col problems; the old model keeps serving.
func TestRefusedDomainChangeKeepsTheOldModel(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "claims.yaml")
	writeAtomic(t, layer, claimsLayer)
	l := startLive(t, "sqlite", filepath.Join(dir, "data"), func(c *app.Config) { c.Domains = []string{layer} })
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "claim", "id": "c1", "status": "open", "amount": 3}); code != 201 {
		t.Fatalf("create claim: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
		t.Fatalf("fact: %d %v", code, body)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"retypes a field with data", "amount: {type: number, storage: ix_n_1}", "amount: {type: string, storage: ix_s_2}",
			layer + ":8:7: entities.claim.fields.amount: retypes field from number to string, which 1 stored entities have"},
		{"removes a fact type in use", "[filed, paid]", "[paid]",
			layer + `:4:3: entities.claim.facts: removes fact type "filed", which facts of stored entities have`},
		{"names a missing ledger", "ledger: builtin", "ledger: nowhere",
			layer + `:4:3: entities.claim.ledger: no built-in ledger or installed plugin is named "nowhere"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeAtomic(t, layer, strings.Replace(claimsLayer, tc.from, tc.to, 1)+
				"  badge:\n    ledger: builtin\n    fields: {}\n    facts: [issued]\n")
			err := l.a.Reload()
			var me *manifest.Error
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload: %v\nwant a problem %s", err, tc.want)
			}
			// Refused whole: the type the same change adds is not there.
			if code, _ := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "badge", "id": "b-" + tc.name[:4]}); code != 400 {
				t.Errorf("type of a refused change: %d", code)
			}
			if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
				t.Errorf("old model after a refused change: %d %v", code, body)
			}
		})
	}
	writeAtomic(t, layer, claimsLayer)
	if err := l.a.Reload(); err != nil {
		t.Fatalf("reload of the served model: %v", err)
	}
}
