package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonDecoder is a small single-pass JSON decoder for facts. It accepts
// exactly what encoding/json accepts (RFC 8259; invalid UTF-8 in strings
// becomes U+FFFD, as encoding/json does) and keeps numbers as json.Number.
type jsonDecoder struct {
	buf []byte
	pos int
}

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

func (d *jsonDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

func (d *jsonDecoder) skipSpace() {
	for d.pos < len(d.buf) {
		switch d.buf[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) fact(f *Fact) error {
	d.skipSpace()
	if d.pos >= len(d.buf) || d.buf[d.pos] != '{' {
		return d.errorf("a fact must be a JSON object")
	}
	d.pos++
	d.skipSpace()
	if d.pos < len(d.buf) && d.buf[d.pos] == '}' {
		d.pos++
		return d.end()
	}
	var pending map[string]error
	for {
		d.skipSpace()
		key, err := d.str()
		if err != nil {
			return err
		}
		d.skipSpace()
		if d.pos >= len(d.buf) || d.buf[d.pos] != ':' {
			return d.errorf("expected ':' after object key")
		}
		d.pos++
		d.skipSpace()
		start := d.pos
		if err := d.field(f, key); err != nil {
			// A value of the wrong type counts only if no later value of
			// the same key replaces it: encoding/json keeps the last of
			// duplicate keys, and so does this decoder.
			d.pos = start
			if d.skipValue(1) != nil {
				return err
			}
			if pending == nil {
				pending = map[string]error{}
			}
			pending[key] = err
		} else {
			delete(pending, key)
		}
		d.skipSpace()
		if d.pos >= len(d.buf) {
			return d.errorf("unexpected end of input in object")
		}
		switch d.buf[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			for _, k := range factKeys {
				if err := pending[k]; err != nil {
					return err
				}
			}
			return d.end()
		default:
			return d.errorf("expected ',' or '}' in object")
		}
	}
}

// factKeys are the keys a fact's decoder reads, in the order their
// errors are reported.
var factKeys = []string{"id", "type", "subtype", "timestamp", "data"}

// field decodes the value of one key of a fact into f.
func (d *jsonDecoder) field(f *Fact, key string) error {
	switch key {
	case "id", "type", "subtype":
		var s string
		var err error
		if d.pos < len(d.buf) && d.buf[d.pos] == 'n' {
			if err := d.literal("null"); err != nil {
				return err
			}
		} else {
			if d.pos >= len(d.buf) || d.buf[d.pos] != '"' {
				return d.errorf("%s must be a string", key)
			}
			if s, err = d.str(); err != nil {
				return err
			}
		}
		switch key {
		case "id":
			f.ID = s
		case "type":
			f.Type = s
		default:
			f.Subtype = s
		}
	case "timestamp":
		start := d.pos
		if d.pos < len(d.buf) && d.buf[d.pos] == 'n' {
			if err := d.literal("null"); err != nil {
				return err
			}
			f.Timestamp = 0
			break
		}
		if err := d.number(); err != nil {
			return err
		}
		ts, err := strconv.ParseInt(string(d.buf[start:d.pos]), 10, 64)
		if err != nil {
			return fmt.Errorf("offset %d: timestamp must be an integer number of milliseconds", start)
		}
		f.Timestamp = ts
	case "data":
		if d.pos < len(d.buf) && d.buf[d.pos] == 'n' {
			if err := d.literal("null"); err != nil {
				return err
			}
			f.Data = nil
			break
		}
		if d.pos >= len(d.buf) || d.buf[d.pos] != '{' {
			return d.errorf("data must be an object")
		}
		v, err := d.object(1)
		if err != nil {
			return err
		}
		f.Data = v
	default:
		if err := d.skipValue(1); err != nil {
			return err
		}
	}
	return nil
}

func (d *jsonDecoder) end() error {
	d.skipSpace()
	if d.pos != len(d.buf) {
		return d.errorf("unexpected data after the fact")
	}
	return nil
}

func (d *jsonDecoder) literal(lit string) error {
	if len(d.buf)-d.pos < len(lit) || string(d.buf[d.pos:d.pos+len(lit)]) != lit {
		return d.errorf("invalid literal")
	}
	d.pos += len(lit)
	return nil
}

// value decodes any JSON value.
func (d *jsonDecoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, d.errorf("nesting too deep")
	}
	if d.pos >= len(d.buf) {
		return nil, d.errorf("unexpected end of input")
	}
	switch c := d.buf[d.pos]; c {
	case '{':
		m, err := d.object(depth + 1)
		if err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		return d.array(depth + 1)
	case '"':
		return d.str()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			start := d.pos
			if err := d.number(); err != nil {
				return nil, err
			}
			return json.Number(d.buf[start:d.pos]), nil
		}
		return nil, d.errorf("invalid character %q looking for a value", c)
	}
}

func (d *jsonDecoder) object(depth int) (map[string]any, error) {
	if depth > maxDepth {
		return nil, d.errorf("nesting too deep")
	}
	d.pos++ // '{'
	m := make(map[string]any, 4)
	d.skipSpace()
	if d.pos < len(d.buf) && d.buf[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		d.skipSpace()
		key, err := d.str()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.buf) || d.buf[d.pos] != ':' {
			return nil, d.errorf("expected ':' after object key")
		}
		d.pos++
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		m[key] = v
		d.skipSpace()
		if d.pos >= len(d.buf) {
			return nil, d.errorf("unexpected end of input in object")
		}
		switch d.buf[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, nil
		default:
			return nil, d.errorf("expected ',' or '}' in object")
		}
	}
}

func (d *jsonDecoder) array(depth int) ([]any, error) {
	if depth > maxDepth {
		return nil, d.errorf("nesting too deep")
	}
	d.pos++ // '['
	a := []any{}
	d.skipSpace()
	if d.pos < len(d.buf) && d.buf[d.pos] == ']' {
		d.pos++
		return a, nil
	}
	for {
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		d.skipSpace()
		if d.pos >= len(d.buf) {
			return nil, d.errorf("unexpected end of input in array")
		}
		switch d.buf[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, nil
		default:
			return nil, d.errorf("expected ',' or ']' in array")
		}
	}
}

// skipValue validates and skips a value.
func (d *jsonDecoder) skipValue(depth int) error {
	if depth > maxDepth {
		return d.errorf("nesting too deep")
	}
	if d.pos >= len(d.buf) {
		return d.errorf("unexpected end of input")
	}
	switch c := d.buf[d.pos]; c {
	case '{', '[':
		closeCh := byte('}')
		if c == '[' {
			closeCh = ']'
		}
		d.pos++
		d.skipSpace()
		if d.pos < len(d.buf) && d.buf[d.pos] == closeCh {
			d.pos++
			return nil
		}
		for {
			d.skipSpace()
			if c == '{' {
				if _, err := d.rawStr(); err != nil {
					return err
				}
				d.skipSpace()
				if d.pos >= len(d.buf) || d.buf[d.pos] != ':' {
					return d.errorf("expected ':' after object key")
				}
				d.pos++
				d.skipSpace()
			}
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			d.skipSpace()
			if d.pos >= len(d.buf) {
				return d.errorf("unexpected end of input")
			}
			if d.buf[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.buf[d.pos] == closeCh {
				d.pos++
				return nil
			}
			return d.errorf("expected ',' or %q", closeCh)
		}
	case '"':
		_, err := d.rawStr()
		return err
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		return d.number()
	}
}

// number validates a number at pos and moves past it.
func (d *jsonDecoder) number() error {
	b, i := d.buf, d.pos
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return d.errorf("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			d.pos = i
			return d.errorf("invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			d.pos = i
			return d.errorf("invalid number")
		}
	}
	d.pos = i
	return nil
}

var errString = errors.New("invalid string")

// rawStr validates a string at pos and moves past it; it reports whether
// the string needs unescaping (escapes or bytes that are not plain ASCII).
func (d *jsonDecoder) rawStr() (complex bool, err error) {
	if d.pos >= len(d.buf) || d.buf[d.pos] != '"' {
		return false, d.errorf("expected a string")
	}
	i := d.pos + 1
	for i < len(d.buf) {
		c := d.buf[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return complex, nil
		case c == '\\':
			complex = true
			if i+1 >= len(d.buf) {
				d.pos = i
				return false, d.errorf("unexpected end of input in string")
			}
			switch d.buf[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d.buf) {
					d.pos = i
					return false, d.errorf("invalid \\u escape")
				}
				for _, h := range d.buf[i+2 : i+6] {
					if !isHex(h) {
						d.pos = i
						return false, d.errorf("invalid \\u escape")
					}
				}
				i += 6
			default:
				d.pos = i
				return false, d.errorf("invalid escape in string")
			}
		case c < 0x20:
			d.pos = i
			return false, d.errorf("control character in string")
		case c >= 0x80:
			complex = true
			i++
		default:
			i++
		}
	}
	d.pos = i
	return false, d.errorf("unexpected end of input in string")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// str decodes a string at pos.
func (d *jsonDecoder) str() (string, error) {
	start := d.pos
	complex, err := d.rawStr()
	if err != nil {
		if err == errString {
			return "", d.errorf("invalid string")
		}
		return "", err
	}
	raw := d.buf[start+1 : d.pos-1]
	if !complex {
		return string(raw), nil
	}
	return unquote(raw), nil
}

// unquote decodes the body of a validated JSON string.
func unquote(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' {
			switch raw[i+1] {
			case '"', '\\', '/':
				out = append(out, raw[i+1])
				i += 2
			case 'b':
				out = append(out, '\b')
				i += 2
			case 'f':
				out = append(out, '\f')
				i += 2
			case 'n':
				out = append(out, '\n')
				i += 2
			case 'r':
				out = append(out, '\r')
				i += 2
			case 't':
				out = append(out, '\t')
				i += 2
			case 'u':
				r := hex4(raw[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 := hex4(raw[i+2 : i+6])
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			}
			continue
		}
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, raw[i:i+size]...)
		}
		i += size
	}
	return string(out)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
