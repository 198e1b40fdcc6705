package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// input reads typed fields from a decoded JSON body, collecting every
// field error instead of stopping at the first.
type input struct {
	m    map[string]any
	errs []problem.FieldError
}

func (in *input) typeErr(key, want string) {
	in.errs = append(in.errs, problem.FieldError{Field: key, Code: problem.CodeType, Message: fmt.Sprintf("%s must be %s", key, want)})
}

func (in *input) require(key string) bool {
	if v, ok := in.m[key]; !ok || v == nil {
		in.errs = append(in.errs, problem.FieldError{Field: key, Code: problem.CodeRequired, Message: key + " is required"})
		return false
	}
	return true
}

func (in *input) str(key string) string {
	v, ok := in.m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		in.typeErr(key, "a string")
	}
	return s
}

func (in *input) integer(key string) int64 {
	v, ok := in.m[key]
	if !ok || v == nil {
		return 0
	}
	n, ok := v.(json.Number)
	if !ok {
		in.typeErr(key, "an integer")
		return 0
	}
	i, ok := platform.WholeNumber(n)
	if !ok {
		in.typeErr(key, "an integer")
	}
	return i
}

// positive refuses key when it is present and not above zero; absent (or
// null) it means no value.
func (in *input) positive(key string) {
	if n, ok := in.m[key].(json.Number); ok {
		if i, ok := platform.WholeNumber(n); ok && i <= 0 {
			in.errs = append(in.errs, problem.FieldError{Field: key, Code: problem.CodeRange, Message: key + " must be positive"})
		}
	}
}

func (in *input) object(key string) map[string]any {
	v, ok := in.m[key]
	if !ok || v == nil {
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		in.typeErr(key, "an object")
	}
	return o
}

// only reports keys outside allowed as unknown fields.
func (in *input) only(allowed ...string) {
	for k := range in.m {
		if !contains(allowed, k) {
			in.errs = append(in.errs, problem.FieldError{Field: k, Code: problem.CodeUnknownField, Message: k + " is not a known field"})
		}
	}
}

func (in *input) err() error {
	if len(in.errs) == 0 {
		return nil
	}
	sortFieldErrors(in.errs)
	return problem.Validation(in.errs)
}

// errWith is err, completed when there are errors with those more finds
// in the same input (the platform's rules), so that one response lists
// every field error; more is not called for a valid shape, whose request
// goes on to the platform anyway. An error on a field already reported is
// left out.
func (in *input) errWith(more func() []problem.FieldError) error {
	if len(in.errs) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(in.errs))
	for _, e := range in.errs {
		seen[e.Field] = true
	}
	for _, e := range more() {
		if !seen[e.Field] {
			in.errs = append(in.errs, e)
		}
	}
	return in.err()
}

func sortFieldErrors(errs []problem.FieldError) {
	slices.SortStableFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Field, b.Field) })
}

// queryInt parses an optional integer query parameter.
func queryInt(raw, name string) (int, error) {
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, problem.Validation([]problem.FieldError{{Field: name, Code: problem.CodeType, Message: name + " must be an integer"}})
	}
	return n, nil
}

// checkQuery refuses query parameters a listing or read does not know,
// and any given more than once: a misspelt filter (typ=) would otherwise
// list everything, and of limit=2&limit=3 only one can count.
func checkQuery(c *fiber.Ctx, known ...string) error {
	var errs []problem.FieldError
	seen := map[string]bool{}
	c.Context().QueryArgs().VisitAll(func(k, _ []byte) {
		name := string(k)
		switch {
		case !slices.Contains(known, name):
			if !seen[name] {
				msg := "unknown query parameter " + name
				if len(known) > 0 {
					msg += "; known are " + strings.Join(known, ", ")
				}
				errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeUnknownField, Message: msg})
			}
		case seen[name]:
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeFormat, Message: name + " is given more than once"})
		}
		seen[name] = true
	})
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Field, b.Field) })
	return problem.Validation(errs)
}

// queryLimit reads the limit query parameter: 0 when absent (the default
// page size), else an integer of at least 1. limit=0 is refused rather
// than read as absent, as the message of the upper bound says.
func queryLimit(c *fiber.Ctx) (int, error) {
	n, err := queryInt(c.Query("limit"), "limit")
	if err == nil && c.Query("limit") != "" && n < 1 {
		return 0, problem.Validation([]problem.FieldError{{Field: "limit", Code: problem.CodeRange,
			Message: fmt.Sprintf("limit must be between 1 and %d", platform.MaxPageSize)}})
	}
	return n, err
}

// refuseBadText answers a validation problem for query parameters (names
// and values, as decoded) and path segments holding NUL or invalid UTF-8:
// no store can hold them, so no filter, id or name made of them can
// match anything. Field errors name the query parameter, or "path".
func refuseBadText(c *fiber.Ctx) error {
	var errs []problem.FieldError
	c.Context().QueryArgs().VisitAll(func(k, v []byte) {
		name := store.Shown(string(k))
		if err := store.CheckText(name, string(k)); err != nil {
			errs = append(errs, invalidField(err.(*store.InvalidInputError)))
			return
		}
		if err := store.CheckText(name, string(v)); err != nil {
			errs = append(errs, invalidField(err.(*store.InvalidInputError)))
		}
	})
	if err := store.CheckText("path", string(c.Context().URI().Path())); err != nil {
		errs = append(errs, invalidField(err.(*store.InvalidInputError)))
	}
	if len(errs) > 0 {
		sortFieldErrors(errs)
		return problem.Validation(errs)
	}
	return c.Next()
}
