//go:build wasip1

package kit

import (
	"bytes"
	"errors"
)

// errSyntax is returned for input the scanner cannot read.
var errSyntax = errors.New("malformed JSON")

// This file is a small JSON scanner: it walks an object's members and
// skips values without building anything, which is all a decide step that
// reads three fields needs.
//
// It is written for the cost model of a Go guest under wazero's
// close-on-context-done: every iteration of a wasm loop leaves native code
// to check whether the instance was closed (about 36 ns on the benchmark
// machine, against 2 ns without the check), so the code avoids per-byte
// loops where it can. Strings are skipped with bytes.IndexByte, which the
// Go runtime implements in wasm assembly four bytes per iteration; the
// host sends compact JSON, so whitespace loops end at once. Reflection
// (encoding/json) runs many thousands of loop iterations for the same
// input: see the benchmark results.

func ws(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i // compact JSON: no loop, so no termination check
	}
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errSyntax
		}
		j += k
		if b[j-1] != '\\' {
			return j + 1, nil
		}
		n := 0 // an escaped quote, or a string ending in an escaped backslash?
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				var err error
				if i, err = skipString(b, i); err != nil {
					return 0, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errSyntax
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] > ' ' {
			j++
		}
		if j == i {
			return 0, errSyntax
		}
		return j, nil
	}
}

// Object iterates over the members of a JSON object without allocating:
//
//	o := kit.NewObject(b)
//	for o.Next() { switch string(o.Key) { ... o.Value ... } }
//	if o.Err != nil { ... }
type Object struct {
	b          []byte
	i          int
	Key, Value []byte // the raw key (without quotes) and the raw value
	Err        error
}

// NewObject starts iterating over the object b.
func NewObject(b []byte) Object {
	i := ws(b, 0)
	if i >= len(b) || b[i] != '{' {
		return Object{Err: errSyntax, i: -1}
	}
	return Object{b: b, i: i + 1}
}

// Next moves to the next member; false at the end or on an error.
func (o *Object) Next() bool {
	if o.i < 0 {
		return false
	}
	b, i := o.b, ws(o.b, o.i)
	if i < len(b) && b[i] == ',' {
		i = ws(b, i+1)
	} else if i < len(b) && b[i] == '}' {
		o.i = -1
		return false
	}
	if i >= len(b) || b[i] != '"' {
		return o.fail()
	}
	end, err := skipString(b, i)
	if err != nil {
		return o.fail()
	}
	o.Key = b[i+1 : end-1]
	i = ws(b, end)
	if i >= len(b) || b[i] != ':' {
		return o.fail()
	}
	i = ws(b, i+1)
	vend, err := skipValue(b, i)
	if err != nil {
		return o.fail()
	}
	o.Value = b[i:vend]
	o.i = vend
	return true
}

func (o *Object) fail() bool {
	o.Err, o.i = errSyntax, -1
	return false
}

// Fields calls fn for each member of the object b until fn returns false.
func Fields(b []byte, fn func(key, val []byte) bool) error {
	o := NewObject(b)
	for o.Next() {
		if !fn(o.Key, o.Value) {
			return nil
		}
	}
	return o.Err
}

// String returns the contents of the JSON string val when it holds no
// escapes; ok is false otherwise. (The host sends valid UTF-8.)
func String(val []byte) (s []byte, ok bool) {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return nil, false
	}
	s = val[1 : len(val)-1]
	return s, bytes.IndexByte(s, '\\') < 0
}

// Decimal reports whether s is a plain non-negative decimal (digits with
// an optional fraction) and whether it is above zero.
func Decimal(s []byte) (ok, positive bool) {
	if len(s) == 0 || len(s) > 40 {
		return false, false
	}
	dot := false
	digits := 0
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
			if c != '0' {
				positive = true
			}
		case c == '.' && !dot && i > 0 && i < len(s)-1:
			dot = true
		default:
			return false, false
		}
	}
	return digits > 0, positive
}
