package sdk

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/factline/factline/sdk/abi"
)

// Plugin is a *Ledger[S] or a *Subscription.
type Plugin interface {
	// Description is the plugin's describe document.
	Description() abi.Description
	check() error
	serve(fn export, in []byte, c *call)
}

var (
	_ Plugin = (*Ledger[struct{}])(nil)
	_ Plugin = (*Subscription)(nil)
)

type export uint8

const (
	exportNone export = iota
	exportDescribe
	exportDecide
	exportEvolve
	exportHandle
)

var registered Plugin

// Register makes p the plugin a WebAssembly module serves; call it once,
// from an init function (a reactor module runs init functions, never
// main). It panics when p is invalid or a plugin is already registered, so
// a broken declaration fails the build's first test or the host's load.
func Register(p Plugin) {
	if registered != nil {
		panic("sdk: Register called twice")
	}
	if err := Check(p); err != nil {
		panic(err.Error())
	}
	registered = p
}

// Check reports what is wrong with p's declaration, as Register would.
func Check(p Plugin) error {
	if p == nil {
		return errors.New("sdk: nil plugin")
	}
	if err := p.check(); err != nil {
		return fmt.Errorf("sdk: plugin %q: %w", p.Description().Name, err)
	}
	return nil
}

// Invoke runs one ABI export (abi.ExportDescribe, ExportDecide,
// ExportEvolve or ExportHandle) of p natively on an input message and
// returns the output exactly as the WebAssembly export frames it: a status
// byte, then JSON. It is the same code the exports run, so a plugin can be
// tested with plain go test; package sdktest builds on it. Invoke is safe
// for concurrent use.
func Invoke(p Plugin, exportName string, input []byte) []byte {
	c := newCall(false)
	serve(p, exportByName(exportName), input, c)
	return c.out.buf
}

// call is what one call works with. A guest has one, reused by every call
// (shared); Invoke makes a fresh one per call.
type call struct {
	out    Encoder // the output
	dec    Decoder // the input message
	data   Decoder // fact data and raw inputs decoded after the message
	shared bool    // scratch values held by the plugin may be reused
}

func newCall(shared bool) *call {
	c := &call{shared: shared}
	c.dec.aux = &c.data
	if shared {
		strs := new(internTable)
		c.dec.strs, c.data.strs = strs, strs
	}
	return c
}

// slot is a scratch value a guest reuses from call to call, with its
// Decodable and Encodable views looked up once: a WebAssembly guest has no
// type-assertion cache, so each assertion would search the runtime's
// interface table again.
type slot[T any] struct {
	v       T
	checked bool
	dec     Decodable
	enc     Encodable
}

// get returns a zeroed *T and its views: the slot's own value when c is
// shared (a guest runs one call at a time), else a new value.
func (s *slot[T]) get(c *call) (*T, Decodable, Encodable) {
	if !c.shared {
		p := new(T)
		dec, _ := any(p).(Decodable)
		enc, _ := any(p).(Encodable)
		return p, dec, enc
	}
	var zero T
	s.v = zero
	if !s.checked {
		s.dec, _ = any(&s.v).(Decodable)
		s.enc, _ = any(&s.v).(Encodable)
		s.checked = true
	}
	return &s.v, s.dec, s.enc
}

func exportByName(name string) export {
	switch name {
	case abi.ExportDescribe:
		return exportDescribe
	case abi.ExportDecide:
		return exportDecide
	case abi.ExportEvolve:
		return exportEvolve
	case abi.ExportHandle:
		return exportHandle
	}
	return exportNone
}

// serve runs one call; a panic becomes a status 5 reply.
func serve(p Plugin, fn export, in []byte, c *call) {
	c.out.Reset()
	defer func() {
		if r := recover(); r != nil {
			writeError(&c.out, &Error{Status: StatusPanic, Code: "panic", Message: panicMessage(r)})
		}
	}()
	switch {
	case p == nil:
		writeError(&c.out, &Error{Status: StatusUnsupported, Code: "unsupported", Message: "no plugin registered: call sdk.Register from an init function"})
	case fn == exportNone:
		writeError(&c.out, &Error{Status: StatusUnsupported, Code: "unsupported", Message: "not a callable export"})
	default:
		p.serve(fn, in, c)
	}
}

func panicMessage(r any) string {
	switch v := r.(type) {
	case string:
		return v
	case error:
		return v.Error()
	}
	return fmt.Sprint(r)
}

// begin starts an ok reply.
func begin(out *Encoder) {
	out.Reset()
	out.buf = append(out.buf, byte(StatusOK))
}

func writeError(out *Encoder, e *Error) {
	out.Reset()
	out.buf = append(out.buf, byte(e.Status))
	out.BeginObject()
	out.Key("code")
	out.String(e.Code)
	out.Key("message")
	out.String(e.Message)
	if e.Field != "" {
		out.Key("field")
		out.String(e.Field)
	}
	out.EndObject()
}

func checkEncoded(out *Encoder) {
	if err := out.Err(); err != nil {
		writeError(out, &Error{Status: StatusPanic, Code: "encode_failed", Message: err.Error()})
	}
}

func writeDescription(out *Encoder, d abi.Description) {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	begin(out)
	out.Raw(b)
}

var nullJSON = []byte("null")

func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

// decodeValue decodes the next value into *v (dec is v's Decodable view,
// or nil); null leaves v as it is.
func decodeValue[T any](d *Decoder, v *T, dec Decodable) error {
	if d.Null() {
		return nil
	}
	if dec != nil {
		return dec.DecodeJSON(d)
	}
	raw, err := d.Raw()
	if err != nil {
		return err
	}
	return jsonError(json.Unmarshal(raw, v))
}

// encodeValue writes *v (enc is v's Encodable view, or nil).
func encodeValue[T any](out *Encoder, v *T, enc Encodable) {
	if enc != nil {
		enc.EncodeJSON(out)
		return
	}
	out.Value(*v)
}

// inputError turns an error met while decoding an input into a bad-input
// reply.
func inputError(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		return &Error{Status: StatusBadInput, Code: "invalid_input", Message: err.Error()}
	}
	if e.Status != StatusBadInput {
		c := *e
		c.Status = StatusBadInput
		return &c
	}
	return e
}

// validName reports whether s is a plugin name: a lowercase letter, then
// up to 62 lowercase letters, digits, '_' or '-'.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func checkHeader(name, version string) error {
	if !validName(name) {
		return fmt.Errorf("name %q must be a lowercase letter then up to 62 lowercase letters, digits, '_' or '-'", name)
	}
	if version == "" {
		return errors.New("Version is empty")
	}
	return nil
}

// intern returns the element of known equal to b, or a string of b, so
// common strings such as fact types cost no allocation.
func intern(b []byte, known []string) string {
	for _, k := range known {
		if equal(b, k) {
			return k
		}
	}
	return string(b)
}

// Keys of the ABI messages, found with keySets.
const (
	kCommand = iota
	kEntity
	kState
	kInput
	kNow
	kFact
	kHandler
)

var envelopeKeys = newKeySet("command", "entity", "state", "input", "now", "fact", "handler")

const (
	kID = iota
	kType
	kTenantID
	kVersion
	kSubtype
	kEntityID
	kEntityType
	kSourceID
	kSeq
	kPosition
	kTimestamp
	kData
)

var recordKeys = newKeySet("id", "type", "tenant_id", "version", "subtype", "entity_id", "entity_type", "source_id", "seq", "position", "timestamp", "data")

var errNotObject = &Error{Status: StatusBadInput, Code: "invalid_json", Message: "the input is not a JSON object"}

// parseEntity reads the entity of a decide input.
func parseEntity(d *Decoder, e *Entity, entityTypes []string) error {
	return d.Object(func(key []byte) (err error) {
		switch recordKeys.find(key) {
		case kID:
			e.ID, err = d.String()
		case kType:
			var b []byte
			b, err = d.Bytes()
			e.Type = intern(b, entityTypes)
		case kTenantID:
			e.TenantID, err = d.String()
		case kVersion:
			e.Version, err = d.Int()
		default:
			err = d.Skip()
		}
		return err
	})
}

// parseFact reads a fact of an evolve or handle input.
func parseFact(d *Decoder, f *Fact, factTypes []string) error {
	return d.Object(func(key []byte) (err error) {
		switch recordKeys.find(key) {
		case kID:
			f.ID, err = d.String()
		case kType:
			var b []byte
			b, err = d.Bytes()
			f.Type = intern(b, factTypes)
		case kSubtype:
			f.Subtype, err = d.String()
		case kTenantID:
			f.TenantID, err = d.String()
		case kEntityID:
			f.EntityID, err = d.String()
		case kEntityType:
			f.EntityType, err = d.String()
		case kSeq:
			f.Seq, err = d.Int()
		case kTimestamp:
			f.Timestamp, err = d.Int()
		case kData:
			f.Data, err = d.Raw()
			if isNull(f.Data) {
				f.Data = nil
			}
		case kPosition:
			f.Position, err = d.Int()
		case kSourceID:
			f.SourceID, err = d.String()
		default:
			err = d.Skip()
		}
		return err
	})
}

// unprefix removes the member name the envelope put before a bad-input
// Field ("input.amount" becomes "amount").
func unprefix(err error, name string) error {
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusBadInput {
		return err
	}
	c := *e
	switch {
	case c.Field == name:
		c.Field = ""
	case len(c.Field) > len(name) && c.Field[:len(name)] == name && c.Field[len(name)] == '.':
		c.Field = c.Field[len(name)+1:]
	}
	return &c
}
