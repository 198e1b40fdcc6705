package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decodable is implemented by types that read themselves from JSON with a
// Decoder. The SDK uses it instead of encoding/json (its fallback) for
// states, command inputs and fact data: a hand-written DecodeJSON does no
// reflection, which matters inside a WebAssembly guest, where every loop
// iteration and every allocation is expensive.
type Decodable interface {
	DecodeJSON(d *Decoder) error
}

// Decoder reads JSON values from a byte slice, one call per value, without
// reflection. Its errors are *Error values with status StatusBadInput;
// Object and Array name the member an error happened in (Field
// "totals.deposit", "[2].amount").
type Decoder struct {
	data  []byte
	pos   int
	depth int
	strs  *internTable // set in a guest: String reuses recent strings
	aux   *Decoder     // for data decoded later in the same call (AppendInput)
}

// NewDecoder returns a Decoder reading data.
func NewDecoder(data []byte) *Decoder { return &Decoder{data: data} }

// Reset makes d read data from the start.
func (d *Decoder) Reset(data []byte) { d.reset(data) }

func (d *Decoder) reset(data []byte) {
	d.data, d.pos, d.depth = data, 0, 0
}

const maxDepth = 512

// ws skips whitespace; usually there is none.
func (d *Decoder) ws() {
	if d.pos < len(d.data) && d.data[d.pos] > ' ' {
		return
	}
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// Peek returns the first byte of the next value ('{', '[', '"', 't', 'f',
// 'n', '-' or a digit), or 0 at the end of the input.
func (d *Decoder) Peek() byte {
	d.ws()
	if d.pos >= len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

// End reports an error unless only whitespace is left.
func (d *Decoder) End() error {
	d.ws()
	if d.pos != len(d.data) {
		return d.syntax("unexpected data after the value")
	}
	return nil
}

// Null consumes a null and reports whether there was one.
func (d *Decoder) Null() bool {
	return d.Peek() == 'n' && d.literal("null")
}

// Object reads an object, calling field for each member with its key;
// field must consume the value (with a value method or Skip). The key is
// only valid during the call (string(key) copies it). null reads as an
// empty object.
func (d *Decoder) Object(field func(key []byte) error) error {
	c := d.Peek()
	if c != '{' {
		if c == 'n' && d.literal("null") {
			return nil
		}
		return d.typeError("object")
	}
	if d.depth++; d.depth > maxDepth {
		return d.syntax("nesting too deep")
	}
	d.pos++
	if d.Peek() == '}' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		// A key of up to 15 bytes followed by '":': no calls, no loop.
		var key []byte
		data, i := d.data, d.pos
		if i+18 <= len(data) && data[i] == '"' {
			j := i + 1
			m := stringStop(load64(data, j))
			if m == 0 {
				j += 8
				m = stringStop(load64(data, j))
			}
			if m != 0 {
				if j += firstFlag(m); data[j] == '"' && data[j+1] == ':' {
					key = data[i+1 : j]
					d.pos = j + 2
				}
			}
		}
		if key == nil {
			var err error
			if key, err = d.key(); err != nil {
				return err
			}
		}
		if err := field(key); err != nil {
			return inField(err, string(key))
		}
		// The common case: no whitespace, then ',' or '}'.
		if d.pos < len(d.data) && d.data[d.pos] == ',' {
			d.pos++
			continue
		}
		switch d.Peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			return nil
		default:
			return d.syntax("expected ',' or '}' in an object")
		}
	}
}

// key reads a member's key and the ':' after it.
func (d *Decoder) key() ([]byte, error) {
	if d.Peek() != '"' {
		return nil, d.syntax("expected a string key")
	}
	key, err := d.stringBytes()
	if err != nil {
		return nil, err
	}
	if d.Peek() != ':' {
		return nil, d.syntax("expected ':' after a key")
	}
	d.pos++
	return key, nil
}

// Array reads an array, calling elem once per element; elem must consume
// the element. null reads as an empty array.
func (d *Decoder) Array(elem func() error) error {
	c := d.Peek()
	if c != '[' {
		if c == 'n' && d.literal("null") {
			return nil
		}
		return d.typeError("array")
	}
	if d.depth++; d.depth > maxDepth {
		return d.syntax("nesting too deep")
	}
	d.pos++
	if d.Peek() == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(); err != nil {
			return inField(err, "["+strconv.Itoa(i)+"]")
		}
		switch d.Peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.syntax("expected ',' or ']' in an array")
		}
	}
}

// String reads a string.
func (d *Decoder) String() (string, error) {
	if data, i := d.data, d.pos; i+9 <= len(data) && data[i] == '"' {
		// Up to 7 bytes: no loop.
		if m := stringStop(load64(data, i+1)); m != 0 {
			if j := i + 1 + firstFlag(m); data[j] == '"' {
				d.pos = j + 1
				if d.strs != nil {
					return d.strs.get(data[i+1 : j]), nil
				}
				return string(data[i+1 : j]), nil
			}
		}
	}
	if d.Peek() != '"' {
		return "", d.typeError("string")
	}
	b, err := d.stringBytes()
	if err != nil {
		return "", err
	}
	if d.strs != nil {
		return d.strs.get(b), nil
	}
	return string(b), nil
}

// Bytes reads a string and returns its bytes, which may share the input:
// they are valid as long as the input is.
func (d *Decoder) Bytes() ([]byte, error) {
	if d.Peek() != '"' {
		return nil, d.typeError("string")
	}
	return d.stringBytes()
}

// Bool reads true or false.
func (d *Decoder) Bool() (bool, error) {
	switch d.Peek() {
	case 't':
		if d.literal("true") {
			return true, nil
		}
	case 'f':
		if d.literal("false") {
			return false, nil
		}
	}
	return false, d.typeError("boolean")
}

// Int reads an integer.
func (d *Decoder) Int() (int64, error) {
	// Up to 15 digits in two words: no calls, no loop.
	if data, i := d.data, d.pos; i+16 <= len(data) && data[i] != '0' {
		w := load64(data, i)
		if m := nonDigit(w); m != 0 {
			if n := firstFlag(m); n > 0 && numberEnds(data[i+n]) {
				d.pos = i + n
				return int64(parse8(w<<(8*(8-n)) | (lsb*'0')>>(8*n))), nil
			}
		} else if m := nonDigit(load64(data, i+8)); m != 0 {
			if n := firstFlag(m); numberEnds(data[i+8+n]) {
				d.pos = i + 8 + n
				lo := parse8(load64(data, i+8)<<(8*(8-n)) | (lsb*'0')>>(8*n))
				return int64(parse8(w)*pow10[n] + lo), nil
			}
		}
	}
	return d.intSlow()
}

// numberEnds reports whether c, after digits, ends a number (it does not
// continue it with a fraction or an exponent).
func numberEnds(c byte) bool { return c != '.' && c != 'e' && c != 'E' }

func (d *Decoder) intSlow() (int64, error) {
	if c := d.Peek(); c != '-' && (c < '0' || c > '9') {
		return 0, d.typeError("integer")
	}
	start := d.pos
	b, err := d.number()
	if err != nil {
		return 0, err
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) > 19 || len(b) == 0 || nonDigitIn(b) {
		d.pos = start
		return 0, d.typeError("integer")
	}
	v := digitsAt(b, 0, len(b))
	switch {
	case !neg && v <= math.MaxInt64:
		return int64(v), nil
	case neg && v <= 1<<63:
		return -int64(v), nil
	}
	d.pos = start
	return 0, &Error{Status: StatusBadInput, Code: "invalid_type", Message: "integer out of range"}
}

// nonDigitIn reports whether b (at most 19 bytes) holds a non-digit.
func nonDigitIn(b []byte) bool {
	for len(b) >= 8 {
		if nonDigit(load64(b, 0)) != 0 {
			return true
		}
		b = b[8:]
	}
	if len(b) == 0 {
		return false
	}
	// Pad the rest with '0's.
	return nonDigit(short(b)|(lsb*'0')<<(8*len(b))) != 0
}

// Float reads a number as a float64 (not for money: use Decimal).
func (d *Decoder) Float() (float64, error) {
	b, err := d.number()
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseFloat(string(b), 64)
	if perr != nil {
		return 0, &Error{Status: StatusBadInput, Code: "invalid_type", Message: "number out of range"}
	}
	return v, nil
}

// Decimal reads an exact decimal from a JSON number or from a string
// holding one ("12.50").
func (d *Decoder) Decimal() (Decimal, error) {
	// The common number, without calls or loops: an optional '-', up to 7
	// integer digits, and up to 7 fraction digits. The rest goes the
	// general way.
	var v Decimal
	data, i := d.data, d.pos
	if i+9 > len(data) {
		return d.decimalSlow()
	}
	if data[i] == '-' {
		v.neg = true
		i++
	}
	if data[i] == '0' && data[i+1] >= '0' && data[i+1] <= '9' {
		return d.decimalSlow()
	}
	w := load64(data, i)
	m := nonDigit(w)
	if m == 0 || m&0xFF != 0 { // 8 digits or more, or none
		return d.decimalSlow()
	}
	n := firstFlag(m)
	v.lo = parse8(w<<(8*(8-n)) | (lsb*'0')>>(8*n))
	i += n
	if data[i] == '.' {
		i++
		if i+8 > len(data) {
			return d.decimalSlow()
		}
		w = load64(data, i)
		if m = nonDigit(w); m == 0 || m&0xFF != 0 {
			return d.decimalSlow()
		}
		nf := firstFlag(m)
		frac := parse8(w<<(8*(8-nf)) | (lsb*'0')>>(8*nf))
		i += nf
		for nf > 0 && frac%10 == 0 {
			frac /= 10
			nf--
		}
		v.lo = v.lo*pow10[nf] + frac
		v.scale = uint8(nf)
	}
	if c := data[i]; c == 'e' || c == 'E' {
		return d.decimalSlow()
	}
	d.pos = i
	if v.lo == 0 {
		return Decimal{}, nil
	}
	return v, nil
}

func (d *Decoder) decimalSlow() (Decimal, error) {
	var b []byte
	var err error
	if d.Peek() == '"' {
		b, err = d.stringBytes()
	} else {
		b, err = d.number()
	}
	if err != nil {
		return Decimal{}, err
	}
	v, perr := parseDecimal(b)
	if perr != nil {
		return Decimal{}, &Error{Status: StatusBadInput, Code: "invalid_decimal", Message: perr.Error()}
	}
	return v, nil
}

// Raw reads any value and returns its JSON text, which shares the input.
func (d *Decoder) Raw() ([]byte, error) {
	d.ws()
	start := d.pos
	if err := d.Skip(); err != nil {
		return nil, err
	}
	return d.data[start:d.pos], nil
}

// Value reads the next value into v: with v's DecodeJSON when v is
// Decodable, with encoding/json otherwise.
func (d *Decoder) Value(v any) error {
	if dv, ok := v.(Decodable); ok {
		return dv.DecodeJSON(d)
	}
	raw, err := d.Raw()
	if err != nil {
		return err
	}
	err = jsonError(json.Unmarshal(raw, v))
	var e *Error
	if errors.As(err, &e) && e.Field == "" && e.Status == StatusBadInput {
		// encoding/json passes an UnmarshalJSON error (a bad Decimal) on
		// without saying where it was: find the member again.
		if field := failingMember(raw, reflect.TypeOf(v)); field != "" && field != "." {
			c := *e
			c.Field = field
			return &c
		}
	}
	return err
}

// jsonFields maps the JSON member names of struct type t to their field
// types, as encoding/json names them: a json tag's name, else the field's
// name; the fields of an embedded struct without a tag name are promoted
// (the shallower field of a name wins).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" && f.Tag.Get("json") == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag != "" {
			name = tag
		}
		out[name] = f.Type
	}
	for _, et := range embedded {
		for name, typ := range jsonFields(et) {
			if _, ok := out[name]; !ok {
				out[name] = typ
			}
		}
	}
	return out
}

// failingMember is the path ("amount", "lines[2].price") of the first
// member of the JSON raw that its field of Go type t cannot take through
// that field's UnmarshalJSON, or "" when none is found.
func failingMember(raw []byte, t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	if t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
			return "."
		}
		return ""
	}
	join := func(name, sub string) string {
		switch {
		case sub == ".":
			return name
		case sub[0] == '[':
			return name + sub
		}
		return name + "." + sub
	}
	switch t.Kind() {
	case reflect.Struct:
		// Members in the order sent: with a name sent twice, encoding/json
		// failed on the first.
		fields := jsonFields(t)
		dec := json.NewDecoder(bytes.NewReader(raw))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return ""
		}
		for dec.More() {
			tok, err := dec.Token()
			key, isKey := tok.(string)
			var value json.RawMessage
			if err != nil || !isKey || dec.Decode(&value) != nil {
				return ""
			}
			ft, ok := fields[key]
			if !ok {
				for name, typ := range fields { // encoding/json matches names without case
					if strings.EqualFold(name, key) {
						ft, ok = typ, true
						break
					}
				}
			}
			if ok {
				if sub := failingMember(value, ft); sub != "" {
					return join(key, sub) // named as sent
				}
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return ""
		}
		for i, item := range items {
			if sub := failingMember(item, t.Elem()); sub != "" {
				return join("["+strconv.Itoa(i)+"]", sub)
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return ""
		}
		for _, k := range slices.Sorted(maps.Keys(members)) {
			if sub := failingMember(members[k], t.Elem()); sub != "" {
				return join(k, sub)
			}
		}
	}
	return ""
}

// Skip reads and discards any value, checking its syntax.
func (d *Decoder) Skip() error {
	switch c := d.Peek(); {
	case c == '"':
		_, err := d.stringBytes()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.number()
		return err
	case c == '{':
		return d.Object(func([]byte) error { return d.Skip() })
	case c == '[':
		return d.Array(d.Skip)
	case c == 't' || c == 'f':
		_, err := d.Bool()
		return err
	case c == 'n':
		if d.literal("null") {
			return nil
		}
	case c == 0:
		return d.syntax("unexpected end of input")
	}
	return d.syntax("invalid character " + strconv.QuoteRune(rune(d.data[d.pos])))
}

func (d *Decoder) literal(lit string) bool {
	if len(d.data)-d.pos >= len(lit) && equal(d.data[d.pos:d.pos+len(lit)], lit) {
		d.pos += len(lit)
		return true
	}
	return false
}

// digits advances over a run of ASCII digits and returns its length.
func (d *Decoder) digits() int {
	start, i, data := d.pos, d.pos, d.data
	if i+8 <= len(data) {
		// Up to 7 digits end in the first word: no loop.
		if m := nonDigit(load64(data, i)); m != 0 {
			d.pos = i + firstFlag(m)
			return d.pos - start
		}
	}
	for i+8 <= len(data) {
		if m := nonDigit(load64(data, i)); m != 0 {
			i += firstFlag(m)
			d.pos = i
			return i - start
		}
		i += 8
	}
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	d.pos = i
	return i - start
}

// number returns the text of a number in JSON syntax.
func (d *Decoder) number() ([]byte, error) {
	c := d.Peek()
	if c != '-' && (c < '0' || c > '9') {
		return nil, d.typeError("number")
	}
	start := d.pos
	if c == '-' {
		d.pos++
	}
	if d.pos < len(d.data) && d.data[d.pos] == '0' {
		if d.pos++; d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			return nil, d.syntax("invalid number (leading zero)")
		}
	} else if d.digits() == 0 {
		return nil, d.syntax("invalid number")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if d.digits() == 0 {
			return nil, d.syntax("invalid number")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if d.digits() == 0 {
			return nil, d.syntax("invalid number")
		}
	}
	return d.data[start:d.pos], nil
}

// stringBytes reads the string at d.pos (a '"'), eight bytes at a time.
// Without escapes the result shares the input; with escapes it is new.
func (d *Decoder) stringBytes() ([]byte, error) {
	start := d.pos + 1
	i, data := start, d.data
	if i+8 <= len(data) {
		// A string of up to 7 bytes ends in the first word: no loop.
		if m := stringStop(load64(data, i)); m != 0 {
			if j := i + firstFlag(m); data[j] == '"' {
				d.pos = j + 1
				return data[start:j], nil
			}
		}
	}
	for {
		if i+8 <= len(data) {
			m := stringStop(load64(data, i))
			if m == 0 {
				i += 8
				continue
			}
			i += firstFlag(m)
		} else {
			for i < len(data) && data[i] >= 0x20 && data[i] != '"' && data[i] != '\\' {
				i++
			}
			if i >= len(data) {
				d.pos = len(data)
				return nil, d.syntax("unterminated string")
			}
		}
		switch data[i] {
		case '"':
			d.pos = i + 1
			return data[start:i], nil
		case '\\':
			return d.unescape(start)
		}
		d.pos = i
		return nil, d.syntax("control character in a string")
	}
}

func (d *Decoder) unescape(start int) ([]byte, error) {
	out := make([]byte, 0, len(d.data)-start)
	i := start
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return out, nil
		case c < 0x20:
			d.pos = i
			return nil, d.syntax("control character in a string")
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(d.data) {
			break
		}
		e := d.data[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4(i)
			if !ok {
				d.pos = i
				return nil, d.syntax("invalid \\u escape")
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 { // a high surrogate wants a low one
				if r2, ok := d.hex4(i + 2); ok && d.data[i] == '\\' && d.data[i+1] == 'u' && r2 >= 0xDC00 && r2 < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					i += 6
				} else {
					r = utf8.RuneError
				}
			} else if r >= 0xDC00 && r < 0xE000 {
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			d.pos = i - 1
			return nil, d.syntax("invalid escape in a string")
		}
	}
	d.pos = len(d.data)
	return nil, d.syntax("unterminated string")
}

func (d *Decoder) hex4(i int) (rune, bool) {
	if i < 0 || i+4 > len(d.data) {
		return 0, false
	}
	var r rune
	for _, c := range d.data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (d *Decoder) syntax(msg string) error {
	return &Error{Status: StatusBadInput, Code: "invalid_json", Message: msg + " at offset " + strconv.Itoa(d.pos)}
}

func (d *Decoder) typeError(want string) error {
	got := "end of input"
	switch c := d.Peek(); {
	case c == '{':
		got = "an object"
	case c == '[':
		got = "an array"
	case c == '"':
		got = "a string"
	case c == 't' || c == 'f':
		got = "a boolean"
	case c == 'n':
		got = "null"
	case c == '-' || (c >= '0' && c <= '9'):
		got = "a number"
	case c != 0:
		return d.syntax("invalid character " + strconv.QuoteRune(rune(c)))
	}
	return &Error{Status: StatusBadInput, Code: "invalid_type", Message: "expected " + want + ", got " + got}
}

// jsonError turns an encoding/json error into a bad-input *Error.
func jsonError(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	out := &Error{Status: StatusBadInput, Code: "invalid_json", Message: err.Error()}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		// Said as the host says it ("points must be an integer"), not in
		// encoding/json's words, which name the plugin's Go types.
		out.Code, out.Field = "invalid_type", te.Field
		out.Message = "expected " + kindWord(te.Type) + ", got " + te.Value
		if te.Field != "" {
			out.Message = te.Field + " must be " + kindWord(te.Type) + ", not " + te.Value
		}
	case errors.As(err, &se):
		out.Message = strings.TrimPrefix(se.Error(), "json: ") + " at offset " + strconv.FormatInt(se.Offset, 10)
	}
	return out
}

// kindWord names what a Go type takes in JSON terms.
func kindWord(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a value of another kind"
}

// inField returns a bad-input error as a copy whose Field is prefixed with
// name (a key or "[i]"); other errors are returned as they are.
func inField(err error, name string) error {
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusBadInput {
		return err
	}
	c := *e
	switch {
	case c.Field == "":
		c.Field = name
	case c.Field[0] == '[':
		c.Field = name + c.Field
	default:
		c.Field = name + "." + c.Field
	}
	return &c
}
