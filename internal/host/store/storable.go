package store

import (
	"encoding/json"

	"github.com/factline/factline/internal/storable"
)

// The rules of what a store can hold are package storable's, shared with
// the plugin conformance kit; these names keep them at hand for the
// stores and their callers.

// ErrInvalidInput: a value the store cannot hold (NUL, invalid UTF-8, a
// number out of range). Errors carrying it are *InvalidInputError.
var ErrInvalidInput = storable.ErrInvalidInput

type (
	// InvalidInputError names a refused value and why.
	InvalidInputError = storable.InvalidInputError
	// Shape is what Inspect learns of a JSON document.
	Shape = storable.Shape
)

// Why a value is refused, and the bounds on numbers.
const (
	ReasonNUL         = storable.ReasonNUL
	ReasonUTF8        = storable.ReasonUTF8
	ReasonNumber      = storable.ReasonNumber
	ReasonJSON        = storable.ReasonJSON
	ReasonDuplicate   = storable.ReasonDuplicate
	MaxNumberDigits   = storable.MaxNumberDigits
	MaxNumberExponent = storable.MaxNumberExponent
)

// CheckText reports a string the store cannot hold.
func CheckText(field, s string) error { return storable.CheckText(field, s) }

// CheckTexts checks pairs of field name and value.
func CheckTexts(pairs ...string) error { return storable.CheckTexts(pairs...) }

// CheckDocument reports a JSON document the store cannot hold.
func CheckDocument(field string, j json.RawMessage) error { return storable.CheckDocument(field, j) }

// Inspect reports every bad value of a valid JSON document, its depth
// and its member count.
func Inspect(doc []byte, prefix string) Shape { return storable.Inspect(doc, prefix) }

// Shown is a value quoted for a message.
func Shown(s string) string { return storable.Shown(s) }

// NumberInRange reports whether a JSON number literal can be stored.
func NumberInRange(lit []byte) bool { return storable.NumberInRange(lit) }

// PlainNumbers returns doc with every number written out, as stored.
func PlainNumbers(doc []byte) []byte { return storable.PlainNumbers(doc) }
