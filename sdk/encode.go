package sdk

import (
	"encoding/json"
	"strconv"
)

// Encodable is implemented by types that write themselves as JSON with an
// Encoder, the counterpart of Decodable; the SDK falls back to
// encoding/json for other types.
type Encodable interface {
	EncodeJSON(e *Encoder)
}

// Encoder appends JSON to a buffer and places the commas itself:
//
//	e.BeginObject()
//	e.Key("amount")
//	e.Decimal(amount)
//	e.EndObject()
//
// It does not check that calls nest correctly; the first error of Value is
// kept and reported by Err.
type Encoder struct {
	buf  []byte
	more bool // a value was written at this level: the next needs a comma
	err  error
}

// Bytes returns the JSON written so far; it is valid until the next write.
func (e *Encoder) Bytes() []byte { return e.buf }

// Err returns the first error Value met.
func (e *Encoder) Err() error { return e.err }

// Reset empties the encoder, keeping its buffer.
func (e *Encoder) Reset() {
	e.buf, e.more, e.err = e.buf[:0], false, nil
}

func (e *Encoder) sep() {
	if e.more {
		e.buf = append(e.buf, ',')
	}
	e.more = true
}

// BeginObject writes '{'.
func (e *Encoder) BeginObject() {
	e.sep()
	e.buf = append(e.buf, '{')
	e.more = false
}

// EndObject writes '}'.
func (e *Encoder) EndObject() {
	e.buf = append(e.buf, '}')
	e.more = true
}

// BeginArray writes '['.
func (e *Encoder) BeginArray() {
	e.sep()
	e.buf = append(e.buf, '[')
	e.more = false
}

// EndArray writes ']'.
func (e *Encoder) EndArray() {
	e.buf = append(e.buf, ']')
	e.more = true
}

// Key writes an object key; the value follows.
func (e *Encoder) Key(k string) {
	e.sep()
	e.buf = appendString(e.buf, k)
	e.buf = append(e.buf, ':')
	e.more = false
}

// String writes a string.
func (e *Encoder) String(s string) {
	e.sep()
	e.buf = appendString(e.buf, s)
}

// Int writes an integer.
func (e *Encoder) Int(v int64) {
	e.sep()
	e.buf = appendInt(e.buf, v)
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendUint(append(b, '-'), uint64(-v))
	}
	return appendUint(b, uint64(v))
}

// Bool writes true or false.
func (e *Encoder) Bool(v bool) {
	e.sep()
	e.buf = strconv.AppendBool(e.buf, v)
}

// Null writes null.
func (e *Encoder) Null() {
	e.sep()
	e.buf = append(e.buf, "null"...)
}

// Decimal writes d as a JSON number with its exact digits.
func (e *Encoder) Decimal(d Decimal) {
	e.sep()
	e.buf = d.Append(e.buf)
}

// Raw writes JSON text as it is (it must be one valid value); empty text
// writes null.
func (e *Encoder) Raw(b []byte) {
	if len(b) == 0 {
		e.Null()
		return
	}
	e.sep()
	e.buf = append(e.buf, b...)
}

// fragment appends JSON text that continues the current value (the SDK's
// own framing), with no comma logic.
func (e *Encoder) fragment(s string) { e.buf = append(e.buf, s...) }

// Value writes v: nil as null, json.RawMessage as it is, an Encodable with
// its EncodeJSON, anything else with encoding/json.
func (e *Encoder) Value(v any) {
	switch x := v.(type) { // concrete types first: they need no interface lookup
	case nil:
		e.Null()
	case json.RawMessage:
		e.Raw(x)
	case string:
		e.String(x)
	case Decimal:
		e.Decimal(x)
	case Encodable:
		x.EncodeJSON(e)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			if e.err == nil {
				e.err = err
			}
			e.Null()
			return
		}
		e.Raw(b)
	}
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Bytes that are not valid UTF-8
// are copied as they are.
func appendString(b []byte, s string) []byte {
	if len(s) < 8 {
		// Short strings: one check of a word padded with spaces.
		var w [8]byte
		copy(w[:], s)
		if stringStop(load64(w[:], 0)|(lsb*' ')<<(8*len(s))) == 0 {
			b = append(b, '"')
			b = append(b, s...)
			return append(b, '"')
		}
	}
	return appendEscaped(b, s)
}

func appendEscaped(b []byte, s string) []byte {
	b = append(b, '"')
	src := stringBytes(s)
	start := 0
	for i := nextStop(src, 0); i < len(src); i = nextStop(src, i) {
		b = append(b, src[start:i]...)
		switch c := src[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, src[start:]...)
	return append(b, '"')
}

// nextStop returns the index of the first byte at or after i that a JSON
// string must escape, or len(b).
func nextStop(b []byte, i int) int {
	for i+8 <= len(b) {
		if m := stringStop(load64(b, i)); m != 0 {
			return i + firstFlag(m)
		}
		i += 8
	}
	if r := len(b) - i; r > 0 {
		// Pad the tail with spaces, which need no escape.
		if m := stringStop(short(b[i:]) | (lsb*' ')<<(8*r)); m != 0 {
			return i + firstFlag(m)
		}
	}
	return len(b)
}
