package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

// JSON renders a document with object keys sorted and two-space
// indentation, ending in a newline; the same document always gives the
// same bytes. Characters such as < and & are written as they are.
func JSON(doc *openapi3.T) ([]byte, error) {
	if doc == nil {
		return nil, errors.New("openapi: no document")
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: encode document: %w", err)
	}
	// kin-openapi marshals through maps, so keys come out sorted; decode
	// and encode once more to indent without escaping HTML characters.
	// Numbers stay as written (json.Number).
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("openapi: re-read document: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("openapi: encode document: %w", err)
	}
	return buf.Bytes(), nil
}
