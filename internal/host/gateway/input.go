package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
	return in.integerWithin(key, fmt.Sprintf("between %d and %d", int64(math.MinInt64), int64(math.MaxInt64)))
}

// version reads an entity or config version (version, expected_version),
// whose out-of-range message names a version's bounds rather than
// int64's.
func (in *input) version(key string) int64 {
	return in.integerWithin(key, fmt.Sprintf("a positive integer, at most %d", int64(math.MaxInt64)))
}

// timestamp reads a fact's timestamp: an integer, whose out-of-range
// message names a fact timestamp's own bounds rather than int64's.
func (in *input) timestamp(key string) int64 {
	return in.integerWithin(key, fmt.Sprintf("milliseconds since the epoch, between 1 and %d (9999-12-31T23:59:59.999Z)", platform.MaxFactTime))
}

// integerWithin is integer, whose range error says the value must be
// bounds.
func (in *input) integerWithin(key, bounds string) int64 {
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
	switch {
	case ok:
	case beyondInt64(n):
		// 1e20 is a whole number, just too large: a range error, not a
		// type one.
		in.errs = append(in.errs, problem.FieldError{Field: key, Code: problem.CodeRange,
			Message: fmt.Sprintf("%s is out of range: it must be %s", key, bounds)})
	default:
		in.typeErr(key, "an integer")
	}
	return i
}

// beyondInt64 reports whether a number's magnitude is past int64's. The
// body was checked before (store.Inspect): its numbers are finite as a
// float64.
func beyondInt64(n json.Number) bool {
	f, err := strconv.ParseFloat(string(n), 64)
	return (err == nil || errors.Is(err, strconv.ErrRange)) && math.Abs(f) >= 1<<63
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

// queryNames are the names of the request's query parameters, in order,
// repeats included: checkQuery(c, queryNames(c)...) refuses only repeats.
func queryNames(c *fiber.Ctx) []string {
	var names []string
	c.Context().QueryArgs().VisitAll(func(k, _ []byte) { names = append(names, string(k)) })
	return names
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
// than read as absent, as the message of the upper bound says; so is a
// number too large for an int, as out of range rather than as no integer.
func queryLimit(c *fiber.Ctx) (int, error) {
	raw := c.Query("limit")
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, problem.Validation([]problem.FieldError{{Field: "limit", Code: problem.CodeRange,
			Message: fmt.Sprintf("limit is out of range: it must be between 1 and %d", platform.MaxPageSize)}})
	case err != nil:
		return 0, problem.Validation([]problem.FieldError{{Field: "limit", Code: problem.CodeType, Message: "limit must be an integer"}})
	case n < 1:
		return 0, problem.Validation([]problem.FieldError{{Field: "limit", Code: problem.CodeRange,
			Message: fmt.Sprintf("limit must be between 1 and %d", platform.MaxPageSize)}})
	}
	return n, nil
}

// refuseHugeMillis refuses the named query parameters (times in
// milliseconds since the epoch, or text) when they are integers too large
// for int64: out of range (code range), where the platform, which reads
// them as no integer, would call them badly formed.
func refuseHugeMillis(c *fiber.Ctx, names ...string) error {
	var errs []problem.FieldError
	for _, name := range names {
		if _, err := strconv.ParseInt(c.Query(name), 10, 64); errors.Is(err, strconv.ErrRange) {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRange,
				Message: fmt.Sprintf("%s is out of range: it must be between 1 and %d milliseconds since the epoch", name, int64(math.MaxInt64))})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return problem.Validation(errs)
}

// refuseEmpty refuses the named query parameters when given with an
// empty value: a listing reads an empty filter as none, so ?type= (a
// value lost in a client's template) would list the whole tenant.
func refuseEmpty(c *fiber.Ctx, names ...string) error {
	var errs []problem.FieldError
	args := c.Context().QueryArgs()
	for _, name := range names {
		if args.Has(name) && len(args.Peek(name)) == 0 {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeFormat,
				Message: name + " must not be empty: leave it out not to filter on it"})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sortFieldErrors(errs)
	return problem.Validation(errs)
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

// refuseNonFinite holds filters on number fields of an entity type to
// the body's number rules (store.NumberInRange): NaN and infinities,
// which strconv.ParseFloat reads ("NaN", "inf", "1e400") where a body
// could not carry them, and numbers a body could not carry either: more
// than store.MaxNumberDigits digits written out (1e200), or a non-zero
// one that rounds to zero as a float64 (1e-400 would match 0). Text that
// is no number, unknown types and unknown fields are left to the
// platform, which refuses them.
func (s *Server) refuseNonFinite(typ string, filters map[string]string) error {
	t := s.platform.Domain().Entities[typ]
	if t == nil {
		return nil
	}
	var errs []problem.FieldError
	for name, raw := range filters {
		f, ok := t.Field(name)
		if !ok {
			continue
		}
		if _, number, _ := store.ParseSlotColumn(f.Storage); !number {
			continue
		}
		n, err := strconv.ParseFloat(raw, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			// Not a number: the platform's to refuse.
		case math.IsNaN(n) || math.IsInf(n, 0):
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRange, Message: name + " must be a finite number"})
		case !json.Valid([]byte(raw)):
			// ParseFloat reads more than JSON numbers (0x1p3, +1, .5): a
			// filter is written as a body's number is.
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeType, Message: name + " must be a number written as in JSON (such as 12.5 or 1e3)"})
		case !store.NumberInRange([]byte(raw)):
			errs = append(errs, invalidField(&store.InvalidInputError{Field: name, Reason: store.ReasonNumber}))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sortFieldErrors(errs)
	return problem.Validation(errs)
}

// readPolicy reads a GET request's Cache-Control header: `no-cache` or
// `max-age=0` (RFC 9111 section 5.2.1) asks for an entity as the store
// holds it, bypassing the process's entity cache, so a client that wrote
// through another process reads its write. Anything else reads through the
// cache. Directive names are case-insensitive; unknown ones are ignored,
// as RFC 9111 says a cache must.
func readPolicy(c *fiber.Ctx) platform.Read {
	h := c.Get(fiber.HeaderCacheControl)
	if h == "" {
		return platform.Cached
	}
	for d := range strings.SplitSeq(h, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch {
		case strings.EqualFold(name, "no-cache"):
			return platform.Fresh
		case strings.EqualFold(name, "max-age"):
			if n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 64); err == nil && n == 0 {
				return platform.Fresh
			}
		}
	}
	return platform.Cached
}
