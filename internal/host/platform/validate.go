package platform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/sdk"
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
// allowed: the contract lets entities carry extra domain fields. written
// says which fields the write sets (nil: all): a number kept in an index
// slot must be one a double holds exactly only when the write sets it, so
// a value stored before that rule does not block a change to other fields.
func validateFields(t *manifest.EntityType, data map[string]any, prefix string, partial bool, written map[string]any) []problem.FieldError {
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
		if s, ok := v.(string); ok && f.Storage != "" && len(s) > MaxSlotLength {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRange, Message: fmt.Sprintf("%s is kept in an index slot, so it must be at most %d bytes (got %d)", name, MaxSlotLength, len(s))})
			continue
		}
		_, set := written[f.Name]
		if n, ok := v.(json.Number); ok && numberSlot(f) && (written == nil || set) {
			if indexed, exact := indexedExactly(string(n)); !exact {
				errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRange, Message: notIndexable(name, string(n), indexed)})
				continue
			}
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
			// Stored as sent, so plugins read it as the integer it is:
			// digits only, no exponent or fraction.
			return "must be an integer written as digits (no exponent or fraction)"
		}
	case manifest.TypeBoolean:
		if _, ok := v.(bool); !ok {
			return "must be a boolean"
		}
	}
	return ""
}

// validateFactData checks a fact's data against its type's schema and
// returns every field error, sorted by field; prefix goes before field
// names ("data."). A nil schema accepts any object.
func validateFactData(s *manifest.FactSchema, data map[string]any, prefix string) []problem.FieldError {
	if s == nil {
		return nil
	}
	var errs []problem.FieldError
	for _, f := range s.Fields {
		v, present := data[f.Name]
		name := prefix + f.Name
		if !present || v == nil {
			if f.Required {
				errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRequired, Message: fmt.Sprintf("%s is required", name)})
			}
			continue
		}
		if msg := checkFactType(f.Type, v); msg != "" {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeType, Message: fmt.Sprintf("%s %s", name, msg)})
			continue
		}
		if len(f.Enum) > 0 && !enumHas(f, v) {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeEnum, Message: fmt.Sprintf("%s must be one of %s", name, strings.Join(f.Enum, ", "))})
		}
	}
	if !s.AdditionalFields {
		for k := range data {
			if _, ok := s.Field(k); !ok {
				errs = append(errs, problem.FieldError{Field: prefix + k, Code: problem.CodeUnknownField, Message: fmt.Sprintf("%s is not a field of this fact type", prefix+k)})
			}
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// checkFactType checks a decoded JSON value (numbers as json.Number)
// against a fact field type.
func checkFactType(typ string, v any) string {
	switch typ {
	case manifest.TypeObject:
		if _, ok := v.(map[string]any); !ok {
			return "must be an object"
		}
	case manifest.TypeArray:
		if _, ok := v.([]any); !ok {
			return "must be an array"
		}
	case manifest.TypeDecimal:
		var text string
		switch d := v.(type) {
		case string:
			text = d
		case json.Number:
			text = d.String()
		default:
			return "must be a decimal (a JSON string or number)"
		}
		if _, err := sdk.ParseDecimal(text); err != nil {
			return "must be an exact decimal, like \"12.50\""
		}
	default:
		return checkType(manifest.Field{Type: typ}, v)
	}
	return ""
}

// enumHas reports whether v is one of f's enum values: strings compare as
// they are, numbers by value (1 and 1.0 are the same).
func enumHas(f manifest.FactField, v any) bool {
	if s, ok := v.(string); ok {
		return f.Type == manifest.TypeString && contains(f.Enum, s)
	}
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	x, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return false
	}
	for _, e := range f.Enum {
		if y, ok := new(big.Rat).SetString(e); ok && x.Cmp(y) == 0 {
			return true
		}
	}
	return false
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
// docJSON encodes a document to be stored: numbers written out
// (store.PlainNumbers), as both stores keep them.
func docJSON(v any) json.RawMessage {
	return store.PlainNumbers(mustJSON(v))
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("platform: encode decoded JSON: %v", err))
	}
	return b
}

// numberSlot reports whether a field is kept in a number index slot
// (ix_n_N), which holds a double-precision float.
func numberSlot(f manifest.Field) bool {
	_, number, ok := store.ParseSlotColumn(f.Storage)
	return ok && number
}

// indexedExactly reports whether the number n (JSON text) is, as a
// decimal, exactly the shortest decimal of the double it rounds to, and
// returns that decimal. Such numbers stay apart in a number index
// slot (distinct such decimals are distinct doubles), so an equality
// filter on the slot matches only what it names; 0.1 is such a number,
// 9007199254740993 (which rounds to ...992) and 0.1000000000000000001
// (to 0.1) are not.
func indexedExactly(n string) (indexed string, exact bool) {
	x, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return "", false
	}
	format := byte('g')
	if a := math.Abs(x); a >= 1 && a < 1e21 {
		format = 'f' // 9007199254740992, not 9.007199254740992e+15
	}
	indexed = strconv.FormatFloat(x, format, -1, 64)
	want, ok1 := new(big.Rat).SetString(n)
	got, ok2 := new(big.Rat).SetString(indexed)
	return indexed, ok1 && ok2 && want.Cmp(got) == 0
}

// notIndexable explains why a number cannot be kept in (or matched in) a
// number index slot.
func notIndexable(name, n, indexed string) string {
	return fmt.Sprintf("%s is kept in a number index slot, a double-precision float that holds about 15 to 17 significant digits: %s would be indexed as %s, which other values share; send it with fewer digits (or keep such values in a string field)", name, n, indexed)
}
