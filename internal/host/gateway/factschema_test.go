package gateway_test

import (
	"testing"
)

// TestAppendBreakingTheFactSchemaListsEveryFieldError: POST /v1/facts
// answers one validation-failed with every field error of
// the fact type's schema; nothing is stored. A fitting fact is stored.
func TestAppendBreakingTheFactSchemaListsEveryFieldError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
		bad := map[string]any{"amount": "ten", "currency": 3, "allow_overdraft": "yes"}
		for _, r := range []*response{
			h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": bad}),
		} {
			r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
			errs := r.fieldErrors()
			if len(errs) != 3 || errs["data.amount"] != "type" || errs["data.currency"] != "type" || errs["data.allow_overdraft"] != "type" {
				t.Errorf("field errors %v", errs)
			}
		}
		if items := h.req("GET", "/v1/entities/"+id+"/facts", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any); len(items) != 0 {
			t.Fatalf("%d facts stored", len(items))
		}
		h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": map[string]any{"amount": "10.50", "currency": "EUR", "note": "kept"}}).wantStatus(t, 201)
	})
}
