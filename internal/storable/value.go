package storable

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// What the product can hold, whichever store keeps it: Postgres refuses
// NUL in text and jsonb (SQLSTATE 22P05, 22021), neither store keeps
// invalid UTF-8 (the JSON decoder would silently turn it into U+FFFD), and
// jsonb's numeric overflows on huge exponents. Both stores and the gateway
// refuse such values with the same rules, so nothing depends on the
// backend.

// ErrInvalidInput: a value the store cannot hold (NUL, invalid UTF-8, a
// number out of range). Errors carrying it are *InvalidInputError.
var ErrInvalidInput = errors.New("invalid input")

// Why a value is refused.
const (
	ReasonNUL    = "nul"    // contains U+0000
	ReasonUTF8   = "utf8"   // not valid UTF-8 (or a lone UTF-16 surrogate escape)
	ReasonNumber = "number" // a number outside MaxNumberDigits, MaxNumberExponent or float64
	ReasonJSON   = "json"   // a document that is not JSON
	// ReasonDuplicate: an object member whose name an earlier member of
	// the same object has. RFC 8259 leaves such objects' meaning open:
	// encoding/json and jsonb keep the last, a text column keeps both, so
	// what was stored would depend on the backend.
	ReasonDuplicate = "duplicate"
)

// Bounds on JSON numbers: a stored number must be a finite float64 (number
// slots and projections read it as one) and a non-zero one must not round
// to zero; its text, kept exactly, has at most MaxNumberDigits digits and a
// written exponent of at most MaxNumberExponent (Postgres's numeric refuses
// larger ones).
const (
	MaxNumberDigits   = 100
	MaxNumberExponent = 1000
)

// InvalidInputError names the refused value: a column-like field ("id",
// "type") or, inside a JSON document, the document's field followed by the
// value's path ("settings.beta", "data.items[2]").
type InvalidInputError struct {
	Field  string
	Reason string
}

func (e *InvalidInputError) Error() string { return e.Field + " " + e.Message() }

// Is makes errors.Is(err, ErrInvalidInput) hold.
func (e *InvalidInputError) Is(target error) bool { return target == ErrInvalidInput }

// Message says what is wrong, without the field.
func (e *InvalidInputError) Message() string {
	switch e.Reason {
	case ReasonNUL:
		return "must not contain NUL characters"
	case ReasonUTF8:
		return "must be valid UTF-8"
	case ReasonNumber:
		return "is out of range: numbers must be finite, with at most " + strconv.Itoa(MaxNumberDigits) + " digits written out in full"
	case ReasonJSON:
		return "is not valid JSON"
	case ReasonDuplicate:
		return "appears more than once in its object"
	}
	return "is not valid"
}

// CheckText reports a string the store cannot hold.
func CheckText(field, s string) error {
	if r := textReason(s); r != "" {
		return &InvalidInputError{Field: field, Reason: r}
	}
	return nil
}

// CheckTexts is CheckText over field, value pairs; it reports the first
// bad one.
func CheckTexts(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := CheckText(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func textReason(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return ReasonNUL
	}
	if !utf8.ValidString(s) {
		return ReasonUTF8
	}
	return ""
}

// CheckDocument reports a JSON document that is not valid JSON or holds a
// value (string, key or number) the store cannot hold.
func CheckDocument(field string, j json.RawMessage) error {
	if len(j) == 0 {
		return nil
	}
	if !json.Valid(j) {
		return &InvalidInputError{Field: field, Reason: ReasonJSON}
	}
	if bad := Inspect(j, field).Bad; len(bad) > 0 {
		return bad[0]
	}
	return nil
}

// Shape is what Inspect learns of a JSON document.
type Shape struct {
	// Bad lists the values the store cannot hold, in document order.
	Bad []*InvalidInputError
	// Depth is the deepest nesting of objects and arrays (0 for a scalar).
	Depth int
	// Keys counts object members at every level.
	Keys int
}

// Inspect walks a syntactically valid JSON document (check with
// json.Valid or a decoder first) and reports every bad string, key and
// number by its path below prefix. It reads the raw bytes because the
// decoder has already replaced invalid UTF-8 by the time values are seen.
func Inspect(doc []byte, prefix string) Shape {
	w := walker{b: doc, prefix: prefix}
	w.value(0)
	return w.shape
}

// walker reads a document once. It keeps the path to the value it is on
// as a stack of members and indexes and spells it out only for a bad
// value: building every value's path as a string made a deeply nested
// document cost the square of its depth.
type walker struct {
	b      []byte
	i      int
	shape  Shape
	prefix string
	path   []step
}

// step is one member name (key) or array index on the walker's path.
type step struct {
	key   string
	index int
	isKey bool
}

func (w *walker) skipSpace() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// where spells out the path to the current value, as join would.
func (w *walker) where() string {
	var sb strings.Builder
	sb.WriteString(w.prefix)
	for _, s := range w.path {
		if !s.isKey {
			sb.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(Shown(s.key))
	}
	return sb.String()
}

func (w *walker) bad(reason string) {
	w.shape.Bad = append(w.shape.Bad, &InvalidInputError{Field: w.where(), Reason: reason})
}

func (w *walker) value(depth int) {
	w.skipSpace()
	if w.i >= len(w.b) {
		return
	}
	switch c := w.b[w.i]; {
	case c == '{':
		w.i++
		w.shape.Depth = max(w.shape.Depth, depth+1)
		var names memberNames
		for {
			w.skipSpace()
			if w.i >= len(w.b) || w.b[w.i] == '}' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
				continue
			}
			key, reason := w.str()
			w.shape.Keys++
			w.path = append(w.path, step{key: key, isKey: true})
			if reason != "" {
				w.bad(reason)
			} else if !names.add(key) {
				w.bad(ReasonDuplicate)
			}
			w.skipSpace()
			w.i++ // ':'
			w.value(depth + 1)
			w.path = w.path[:len(w.path)-1]
		}
	case c == '[':
		w.i++
		w.shape.Depth = max(w.shape.Depth, depth+1)
		for n := 0; ; n++ {
			w.skipSpace()
			if w.i >= len(w.b) || w.b[w.i] == ']' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
			}
			w.path = append(w.path, step{index: n})
			w.value(depth + 1)
			w.path = w.path[:len(w.path)-1]
		}
	case c == '"':
		if _, reason := w.str(); reason != "" {
			w.bad(reason)
		}
	case c == '-' || c >= '0' && c <= '9':
		start := w.i
		for w.i < len(w.b) && strings.IndexByte("+-.eE0123456789", w.b[w.i]) >= 0 {
			w.i++
		}
		if !NumberInRange(w.b[start:w.i]) {
			w.bad(ReasonNumber)
		}
	default: // true, false, null
		for w.i < len(w.b) && w.b[w.i] >= 'a' && w.b[w.i] <= 'z' {
			w.i++
		}
	}
}

// memberNames is the set of one object's member names: a slice while the
// object is small (most are), a map once a linear scan would cost more.
type memberNames struct {
	few  []string
	many map[string]struct{}
}

// add records name and reports whether it was new.
func (n *memberNames) add(name string) bool {
	if n.many != nil {
		if _, dup := n.many[name]; dup {
			return false
		}
		n.many[name] = struct{}{}
		return true
	}
	for _, k := range n.few {
		if k == name {
			return false
		}
	}
	n.few = append(n.few, name)
	if len(n.few) > 16 {
		n.many = make(map[string]struct{}, 2*len(n.few))
		for _, k := range n.few {
			n.many[k] = struct{}{}
		}
		n.few = nil
	}
	return true
}

// Shown is s with U+FFFD in place of NUL and invalid bytes, fit to name a
// field in an error.
func Shown(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// str reads the string at w.i (on its opening quote) and returns its
// decoded text and why it is bad ("" when it is not).
func (w *walker) str() (string, string) {
	w.i++ // opening quote
	var sb strings.Builder
	reason := ""
	note := func(r string) {
		if reason == "" || r == ReasonNUL {
			reason = r
		}
	}
	for w.i < len(w.b) {
		c := w.b[w.i]
		switch {
		case c == '"':
			w.i++
			return sb.String(), reason
		case c == '\\':
			if w.i+1 >= len(w.b) {
				w.i = len(w.b)
				return sb.String(), reason
			}
			e := w.b[w.i+1]
			w.i += 2
			if e != 'u' {
				sb.WriteByte(unescape(e))
				continue
			}
			r := w.hex4()
			switch {
			case r == 0:
				note(ReasonNUL)
				sb.WriteByte(0)
			case utf16.IsSurrogate(r):
				// A high surrogate must be followed by an escaped low one.
				if r < 0xDC00 && w.i+1 < len(w.b) && w.b[w.i] == '\\' && w.b[w.i+1] == 'u' {
					save := w.i
					w.i += 2
					if r2 := w.hex4(); r2 >= 0xDC00 && r2 <= 0xDFFF {
						sb.WriteRune(utf16.DecodeRune(r, r2))
						continue
					}
					w.i = save
				}
				note(ReasonUTF8)
				sb.WriteRune(utf8.RuneError)
			default:
				sb.WriteRune(r)
			}
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			w.i++
		default:
			r, size := utf8.DecodeRune(w.b[w.i:])
			if r == utf8.RuneError && size <= 1 {
				note(ReasonUTF8)
			}
			sb.Write(w.b[w.i : w.i+size])
			w.i += size
		}
	}
	return sb.String(), reason
}

func (w *walker) hex4() rune {
	if w.i+4 > len(w.b) {
		w.i = len(w.b)
		return utf8.RuneError
	}
	n, err := strconv.ParseUint(string(w.b[w.i:w.i+4]), 16, 32)
	w.i += 4
	if err != nil {
		return utf8.RuneError
	}
	return rune(n)
}

func unescape(e byte) byte {
	switch e {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return e // '"', '\\', '/'
}

// NumberInRange reports whether a JSON number literal is one the product
// stores (see MaxNumberDigits): a literal with an exponent is counted
// written out, as it is stored (1e-99 has 100 digits, 1e-100 101).
func NumberInRange(lit []byte) bool {
	mant, exp, _ := bytes.Cut(bytes.ToLower(lit), []byte("e"))
	digits, nonZero := 0, false
	for _, c := range mant {
		if c >= '0' && c <= '9' {
			digits++
			nonZero = nonZero || c != '0'
		}
	}
	if digits > MaxNumberDigits {
		return false
	}
	if len(exp) > 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(string(exp), "+"))
		if err != nil || e > MaxNumberExponent || e < -MaxNumberExponent {
			return false
		}
		// Stored written out (PlainNumbers): its digits then count.
		if plain, ok := plainNumber(lit); ok && countDigits(plain) > MaxNumberDigits {
			return false
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false // ±Inf: out of float64's range
	}
	return f != 0 || !nonZero // a non-zero number must not round to zero
}

func countDigits(b []byte) int {
	n := 0
	for _, c := range b {
		if c >= '0' && c <= '9' {
			n++
		}
	}
	return n
}
