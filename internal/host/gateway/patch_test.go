package gateway_test

import (
	"encoding/json"
	"testing"
)

// TestPatchIsAMergePatch: PATCH /v1/entities/:id applies RFC 7396 to the
// fields and to the metadata: a null removes a member at any depth, an
// object merges member by member, and metadata: null clears the metadata.
// Before, a nested object replaced the stored one (its other members were
// lost) and nulls were stored as values.
func TestPatchIsAMergePatch(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := setup(t, backend)
			h.req("POST", "/v1/entities", h.keyA, `{"type":"account","id":"md1","name":"A","status":"active","subtype":"customer",`+
				`"extra":{"c":1,"d":2},"keep":"k","metadata":{"a":1,"b":{"c":1,"d":2}}}`).wantStatus(t, 201)
			for _, tc := range []struct {
				name, patch    string
				data, metadata string // what the entity holds after the patch (fields other than the account's own)
			}{
				{"nested nulls remove, objects merge",
					`{"version":1,"metadata":{"a":null,"b":{"c":null},"e":3},"extra":{"c":null},"keep":null}`,
					`{"extra":{"d":2}}`, `{"b":{"d":2},"e":3}`},
				{"an object over a scalar replaces it, nulls dropped",
					`{"version":2,"extra":{"d":{"x":1,"y":null}},"metadata":{"e":{"f":null}}}`,
					`{"extra":{"d":{"x":1}}}`, `{"b":{"d":2},"e":{}}`},
				{"a scalar replaces an object",
					`{"version":3,"extra":5}`,
					`{"extra":5}`, `{"b":{"d":2},"e":{}}`},
				{"metadata null clears it",
					`{"version":4,"metadata":null}`,
					`{"extra":5}`, `{}`},
			} {
				got := h.req("PATCH", "/v1/entities/md1", h.keyA, tc.patch).wantStatus(t, 200).data()
				read := h.req("GET", "/v1/entities/md1?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()
				for _, e := range []map[string]any{got, read} {
					data := e["data"].(map[string]any)
					for _, own := range []string{"name", "status", "subtype"} {
						delete(data, own)
					}
					if d, m := jsonOf(t, data), jsonOf(t, e["metadata"]); d != canonJSON(t, tc.data) || m != canonJSON(t, tc.metadata) {
						t.Errorf("%s: data %s metadata %s, want %s and %s", tc.name, d, m, tc.data, tc.metadata)
					}
				}
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func canonJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return jsonOf(t, v)
}
