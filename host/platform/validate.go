package platform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/factline/factline/host/manifest"
	"github.com/factline/factline/host/problem"
)

// DecodeObject decodes a JSON object keeping numbers exact (json.Number),
// so amounts are never rounded through float64.
func DecodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON object")
	}
	if m == nil {
		return nil, fmt.Errorf("expected a JSON object, got null")
	}
	return m, nil
}

// validateFields checks entity data against the type's field declarations.
// partial skips the required check (for patches). Undeclared fields are
// allowed: the contract lets entities carry extra domain fields.
func validateFields(t *manifest.EntityType, data map[string]any, prefix string, partial bool) []problem.FieldError {
	var errs []problem.FieldError
	for _, f := range t.Fields {
		v, present := data[f.Name]
		name := prefix + f.Name
		if !present || v == nil {
			if f.Required && !partial {
				errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRequired, Message: fmt.Sprintf("%s is required", name)})
			} else if present && f.Required {
				errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRequired, Message: fmt.Sprintf("%s is required and cannot be null", name)})
			}
			continue
		}
		if msg := checkType(f, v); msg != "" {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeType, Message: fmt.Sprintf("%s %s", name, msg)})
			continue
		}
		if len(f.Enum) > 0 {
			if s, _ := v.(string); !contains(f.Enum, s) {
				errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeEnum, Message: fmt.Sprintf("%s must be one of %s", name, strings.Join(f.Enum, ", "))})
			}
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

func checkType(f manifest.Field, v any) string {
	switch f.Type {
	case manifest.TypeString:
		if _, ok := v.(string); !ok {
			return "must be a string"
		}
	case manifest.TypeNumber:
		n, ok := v.(json.Number)
		if !ok {
			return "must be a number"
		}
		if x, err := n.Float64(); err != nil || math.IsInf(x, 0) {
			return "must be a finite number"
		}
	case manifest.TypeInteger:
		n, ok := v.(json.Number)
		if !ok {
			return "must be an integer"
		}
		if _, err := n.Int64(); err != nil {
			return "must be an integer"
		}
	case manifest.TypeBoolean:
		if _, ok := v.(bool); !ok {
			return "must be a boolean"
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mustJSON encodes values produced by DecodeObject, which always encode.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("platform: encode decoded JSON: %v", err))
	}
	return b
}
