package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/factline/factline/sdk/abi"
)

// Ledger is a ledger plugin over entity state S: the commands it serves and
// how a fact changes the state. The host passes S between calls as JSON;
// implement Decodable and Encodable on S to skip reflection (see Decoder).
//
// The zero S is the state of an entity with no facts yet.
type Ledger[S any] struct {
	Name        string   // the plugin's name: what a domain manifest's ledger key names
	Version     string   // the plugin's version, for example "1.0.0"
	EntityTypes []string // the entity types it serves
	Emits       []string // every fact type it records, or [AnyFactType]; Evolve takes all of them

	// Commands are what the ledger serves (Write and Read build them). A
	// ledger without an "append" command refuses raw appends.
	Commands []Decider[S]

	// Evolve folds one recorded fact into the state. It must accept every
	// type in Emits and be deterministic: replaying an entity's facts from
	// the zero S rebuilds its state.
	Evolve func(state S, fact Fact) S

	state, next slot[S] // scratch values
}

// AnyFactType, as a ledger's only Emits entry, records any fact type the
// domain manifest declares for the entity's type: a ledger for types whose
// logic is "record what happened" uses it, so that a domain manifest can
// add fact types to them without a new build of the plugin. The host
// refuses other fact types before a decision and checks the decided ones
// again; Evolve must then accept any fact type.
const AnyFactType = abi.AnyFactType

// Entity identifies the entity a command is about.
type Entity = abi.EntityRef

// Command declares a command: its name, and when it is an HTTP route, the
// method and the path the host mounts under /v1/entities/:id.
type Command struct {
	Name        string
	Method      string   // GET, POST, PUT, PATCH or DELETE; with Path only
	Path        string   // for example "/deposit"; empty: not mounted
	Description string   // one line for the OpenAPI document
	Emits       []string // the fact types it may record (write commands)
}

// Cmd is one command as a decide function receives it: the decoded input,
// the entity it is about and the decision time.
type Cmd[I any] struct {
	Name   string // the command's name
	Entity Entity
	Input  I
	Now    int64 // ms since the epoch, fixed by the host: use it, not the clock
}

// NewFact is a fact a decide function records. Data is encoded with
// Encoder.Value (an Encodable, a json.RawMessage or anything encoding/json
// takes) and must encode to a JSON object: a struct, a map, or a
// json.RawMessage holding one (nil records {}). Anything else, a []byte
// among them (encoding/json writes it as a base64 string), is refused by
// the host and the command answers 500. A zero Timestamp means the host's
// now; a negative one is refused the same way.
type NewFact struct {
	Type      string
	Subtype   string
	Data      any
	Timestamp int64
}

// Fact is a recorded fact, as Evolve and subscription handlers receive it.
// Data is the fact's JSON data and shares the call's input buffer: it is
// valid until the function returns (copy it to keep it).
type Fact struct {
	ID         string
	Type       string
	Subtype    string
	TenantID   string
	EntityID   string
	EntityType string
	SourceID   string
	Seq        int64
	Position   int64
	Timestamp  int64 // ms since the epoch
	Data       []byte

	dec *Decoder // the call's data decoder, when there is one
}

// Decode decodes the fact's data into v (with DecodeJSON when v is
// Decodable, else with encoding/json). Missing data decodes as null.
func (f Fact) Decode(v any) error { return decodeData(f.dec, f.Data, v) }

// decodeData decodes one JSON value into v with d (reset to data), or a
// new Decoder when d is nil.
func decodeData(d *Decoder, data []byte, v any) error {
	if len(data) == 0 {
		data = nullJSON
	}
	if d == nil {
		d = new(Decoder)
	}
	d.reset(data)
	if err := d.Value(v); err != nil {
		return err
	}
	return d.End()
}

// Decider is a command of a Ledger[S], built by Write or Read.
type Decider[S any] interface {
	spec() abi.Command
	// decodeInput decodes the command's input with d into a scratch
	// value and returns a pointer to it.
	decodeInput(c *call, d *Decoder) (any, error)
	run(l *Ledger[S], state S, input any, env *decideEnv, c *call)
}

// decideEnv is what a decide input says besides state and input.
type decideEnv struct {
	entity Entity
	now    int64
}

// Write declares a command that records facts: decide returns the facts
// for the state and input (none is fine), or an error to refuse. The input
// is decoded into I (use struct{} for none); the command's description
// carries I's JSON Schema (see SchemaOf).
func Write[S, I any](c Command, decide func(state S, cmd Cmd[I]) ([]NewFact, error)) Decider[S] {
	return &writeCmd[S, I]{c: abi.Command{Name: c.Name, Method: c.Method, Path: c.Path, Emits: c.Emits, Description: c.Description,
		InputSchema: SchemaOf[I]()}, fn: decide}
}

// Read declares a read-only command: it answers a result computed from the
// state (encoded like NewFact.Data) and records nothing. The description
// carries the JSON Schemas of I and R (see SchemaOf).
func Read[S, I, R any](c Command, answer func(state S, cmd Cmd[I]) (R, error)) Decider[S] {
	return &readCmd[S, I, R]{c: abi.Command{Name: c.Name, Method: c.Method, Path: c.Path, Emits: c.Emits, Description: c.Description, ReadOnly: true,
		InputSchema: SchemaOf[I](), ResultSchema: SchemaOf[R]()}, fn: answer}
}

// AppendInput is the input of the built-in "append" command, a raw fact
// append (POST /v1/facts or a gateway emit). Declare it with
// Write(Command{Name: "append"}, fn) to accept raw appends.
type AppendInput struct {
	Type      string
	Subtype   string
	Timestamp int64
	// Data is the raw JSON object, sharing the input (valid during the
	// call). As a json.RawMessage it is recorded as it is when given as
	// a NewFact's Data; a plain []byte would be encoded as a base64
	// string, which the host refuses as fact data.
	Data json.RawMessage

	dec *Decoder
}

// DecodeJSON implements Decodable.
func (a *AppendInput) DecodeJSON(d *Decoder) error {
	a.dec = d.aux
	return d.Object(func(key []byte) (err error) {
		switch recordKeys.find(key) {
		case kType:
			a.Type, err = d.String()
		case kSubtype:
			a.Subtype, err = d.String()
		case kTimestamp:
			a.Timestamp, err = d.Int()
		case kData:
			a.Data, err = d.Raw()
			if isNull(a.Data) {
				a.Data = nil
			}
		default:
			err = d.Skip()
		}
		return err
	})
}

// DecodeData decodes the appended fact's data into v, like Fact.Decode;
// the Field of a bad-input error starts with "data".
func (a AppendInput) DecodeData(v any) error {
	return inField(decodeData(a.dec, a.Data, v), "data")
}

type writeCmd[S, I any] struct {
	c  abi.Command
	fn func(S, Cmd[I]) ([]NewFact, error)
	in slot[I]
}

func (w *writeCmd[S, I]) spec() abi.Command { return w.c }

func (w *writeCmd[S, I]) decodeInput(c *call, d *Decoder) (any, error) {
	in, dec, _ := w.in.get(c)
	return in, decodeValue(d, in, dec)
}

func (w *writeCmd[S, I]) run(l *Ledger[S], state S, input any, env *decideEnv, c *call) {
	out := &c.out
	facts, err := w.fn(state, Cmd[I]{Name: w.c.Name, Entity: env.entity, Input: *input.(*I), Now: env.now})
	if err != nil {
		writeError(out, asReply(err))
		return
	}
	emits := w.c.Emits
	if len(emits) == 0 {
		emits = l.Emits
	}
	begin(out)
	out.fragment(`{"facts":[`)
	for i := range facts {
		f := &facts[i]
		if !abi.EmitsType(emits, f.Type) {
			panic(fmt.Sprintf("sdk: command %s recorded a fact of type %q, which it does not declare in Emits", w.c.Name, f.Type))
		}
		if i > 0 {
			out.fragment(`,`)
		}
		out.fragment(`{"type":`)
		out.buf = appendString(out.buf, f.Type)
		if f.Subtype != "" {
			out.fragment(`,"subtype":`)
			out.buf = appendString(out.buf, f.Subtype)
		}
		if f.Data != nil {
			out.fragment(`,"data":`)
			out.more = false
			out.Value(f.Data)
		}
		if f.Timestamp != 0 {
			out.fragment(`,"timestamp":`)
			out.buf = appendInt(out.buf, f.Timestamp)
		}
		out.fragment(`}`)
	}
	out.fragment(`]}`)
	checkEncoded(out)
}

type readCmd[S, I, R any] struct {
	c   abi.Command
	fn  func(S, Cmd[I]) (R, error)
	in  slot[I]
	res slot[R]
}

func (r *readCmd[S, I, R]) spec() abi.Command { return r.c }

func (r *readCmd[S, I, R]) decodeInput(c *call, d *Decoder) (any, error) {
	in, dec, _ := r.in.get(c)
	return in, decodeValue(d, in, dec)
}

func (r *readCmd[S, I, R]) run(_ *Ledger[S], state S, input any, env *decideEnv, c *call) {
	res, _, enc := r.res.get(c)
	var err error
	*res, err = r.fn(state, Cmd[I]{Name: r.c.Name, Entity: env.entity, Input: *input.(*I), Now: env.now})
	if err != nil {
		writeError(&c.out, asReply(err))
		return
	}
	begin(&c.out)
	c.out.fragment(`{"result":`)
	encodeValue(&c.out, res, enc)
	c.out.fragment(`}`)
	checkEncoded(&c.out)
}

// Description implements Plugin.
func (l *Ledger[S]) Description() abi.Description {
	d := abi.Description{
		ABI:         abi.Version,
		Name:        l.Name,
		Version:     l.Version,
		Kind:        abi.KindLedger,
		EntityTypes: l.EntityTypes,
		Emits:       l.Emits,
	}
	for _, c := range l.Commands {
		d.Commands = append(d.Commands, c.spec())
	}
	return d
}

func (l *Ledger[S]) check() error {
	if err := checkHeader(l.Name, l.Version); err != nil {
		return err
	}
	if len(l.EntityTypes) == 0 {
		return errors.New("EntityTypes is empty")
	}
	if l.Evolve == nil {
		return errors.New("Evolve is nil")
	}
	if err := checkAny("Emits", l.Emits); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, c := range l.Commands {
		s := c.spec()
		switch {
		case s.Name == "":
			return errors.New("a command has no name")
		case seen[s.Name]:
			return fmt.Errorf("command %s declared twice", s.Name)
		case (s.Path == "") != (s.Method == ""):
			return fmt.Errorf("command %s: set both Method and Path, or neither", s.Name)
		case s.Path != "" && (s.Path[0] != '/' || len(s.Path) < 2):
			return fmt.Errorf("command %s: path %q must start with / and name something", s.Name, s.Path)
		case s.Method != "" && !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, s.Method):
			return fmt.Errorf("command %s: method %q is not GET, POST, PUT, PATCH or DELETE", s.Name, s.Method)
		case s.ReadOnly && len(s.Emits) > 0:
			return fmt.Errorf("command %s is read-only but declares Emits", s.Name)
		}
		if err := checkAny("command "+s.Name+" Emits", s.Emits); err != nil {
			return err
		}
		for _, t := range s.Emits {
			if !abi.EmitsType(l.Emits, t) {
				return fmt.Errorf("command %s emits %q, which is not in the ledger's Emits", s.Name, t)
			}
		}
		seen[s.Name] = true
	}
	return nil
}

func (l *Ledger[S]) serve(fn export, in []byte, c *call) {
	switch fn {
	case exportDescribe:
		writeDescription(&c.out, l.Description())
	case exportDecide:
		l.decide(in, c)
	case exportEvolve:
		l.evolve(in, c)
	default:
		writeError(&c.out, &Error{Status: StatusUnsupported, Code: "unsupported", Message: "a ledger has no subscription handlers"})
	}
}

func (l *Ledger[S]) command(name []byte) Decider[S] {
	for _, c := range l.Commands {
		if equal(name, c.spec().Name) {
			return c
		}
	}
	return nil
}

// decide reads the input in one pass, decoding state and input (when the
// command comes first, as the host writes it) straight into scratch values.
func (l *Ledger[S]) decide(in []byte, c *call) {
	var (
		env      decideEnv
		command  []byte
		cmd      Decider[S]
		input    any
		rawInput []byte
		hasInput bool
		where    string // "state" or "input" while decoding them
	)
	state, stateDec, _ := l.state.get(c)
	d := &c.dec
	d.reset(in)
	if d.Peek() != '{' {
		writeError(&c.out, errNotObject)
		return
	}
	err := d.Object(func(key []byte) (err error) {
		switch envelopeKeys.find(key) {
		case kCommand:
			if command, err = d.Bytes(); err == nil {
				cmd = l.command(command)
			}
		case kEntity:
			err = parseEntity(d, &env.entity, l.EntityTypes)
		case kState:
			where = "state"
			err = decodeValue(d, state, stateDec)
		case kInput:
			hasInput = true
			if cmd != nil {
				where = "input"
				input, err = cmd.decodeInput(c, d)
			} else {
				rawInput, err = d.Raw()
			}
		case kNow:
			env.now, err = d.Int()
		default:
			err = d.Skip()
		}
		if err == nil {
			where = ""
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	switch {
	case err != nil && where == "state":
		writeError(&c.out, stateError(err))
		return
	case err != nil && where == "input":
		writeError(&c.out, inputError(unprefix(err, "input")))
		return
	case err != nil:
		writeError(&c.out, inputError(err))
		return
	case command == nil:
		writeError(&c.out, &Error{Status: StatusBadInput, Code: "missing_command", Message: "the input names no command", Field: "command"})
		return
	case cmd == nil && string(command) == abi.CommandAppend:
		writeError(&c.out, &Error{Status: StatusBusinessError, Code: "append_not_supported", Message: "ledger " + l.Name + " does not accept raw appends"})
		return
	case cmd == nil:
		writeError(&c.out, &Error{Status: StatusUnknownCommand, Code: "unknown_command", Message: "ledger " + l.Name + " has no command " + strconv.Quote(string(command))})
		return
	case env.entity.Type != "" && !slices.Contains(l.EntityTypes, env.entity.Type):
		writeError(&c.out, &Error{Status: StatusBadInput, Code: "wrong_entity_type", Message: "ledger " + l.Name + " does not serve entities of type " + strconv.Quote(env.entity.Type), Field: "entity.type"})
		return
	}
	if !hasInput || rawInput != nil {
		c.data.reset(rawInput)
		if !hasInput {
			c.data.reset(nullJSON)
		}
		if input, err = cmd.decodeInput(c, &c.data); err == nil {
			err = c.data.End()
		}
		if err != nil {
			writeError(&c.out, inputError(err))
			return
		}
	}
	cmd.run(l, *state, input, &env, c)
}

func (l *Ledger[S]) evolve(in []byte, c *call) {
	var (
		fact  Fact
		where string
	)
	state, stateDec, _ := l.state.get(c)
	d := &c.dec
	d.reset(in)
	if d.Peek() != '{' {
		writeError(&c.out, errNotObject)
		return
	}
	err := d.Object(func(key []byte) (err error) {
		switch envelopeKeys.find(key) {
		case kState:
			where = "state"
			err = decodeValue(d, state, stateDec)
		case kFact:
			err = parseFact(d, &fact, l.Emits)
		default:
			err = d.Skip()
		}
		if err == nil {
			where = ""
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		if where == "state" {
			writeError(&c.out, stateError(err))
		} else {
			writeError(&c.out, inputError(err))
		}
		return
	}
	fact.dec = &c.data
	next, _, nextEnc := l.next.get(c)
	*next = l.Evolve(*state, fact)
	begin(&c.out)
	encodeValue(&c.out, next, nextEnc)
	checkEncoded(&c.out)
}

func stateError(err error) *Error {
	e := *inputError(err)
	e.Code = "invalid_state"
	if e.Field == "" {
		e.Field = "state"
	}
	return &e
}

// checkAny refuses AnyFactType beside named fact types: it already allows
// them all.
func checkAny(what string, emits []string) error {
	if len(emits) > 1 && slices.Contains(emits, AnyFactType) {
		return fmt.Errorf("%s lists AnyFactType beside other fact types; it allows them all", what)
	}
	return nil
}
