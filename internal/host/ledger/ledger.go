// Package ledger defines how an entity type's business logic is plugged in.
//
// A ledger is a decision function over one entity: given the entity's folded
// state and a command it decides which facts to record (or refuses with a
// business error), and given a state and a fact it evolves the state. The
// host owns persistence, concurrency, idempotency and time, so a ledger is
// deterministic and its state is a disposable cache that can always be
// rebuilt by replaying the entity's facts.
//
// The domain manifest's `ledger` key names the implementation of each entity
// type; a [Registry] resolves those names. The built-in "builtin" ledger
// accepts any declared fact and keeps no state; WebAssembly plugins provide
// richer ledgers behind the same interface.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Command asks a ledger to decide.
type Command struct {
	// Name is the command, for example "append" for a raw fact append or a
	// plugin-defined command such as "deposit".
	Name       string
	TenantID   string
	EntityID   string
	EntityType string
	// EntityVersion is the version of the entity the decision is made on.
	EntityVersion int64
	// Input is the command's JSON payload.
	Input json.RawMessage
	// Now is the decision time in ms since the epoch, fixed by the host.
	Now int64
}

// NewFact is a fact a ledger decided to record; the host assigns ids,
// positions and sequence numbers.
type NewFact struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype,omitempty"`
	Timestamp int64           `json:"timestamp,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// Decision is the outcome of Decide.
type Decision struct {
	Facts []NewFact
	// Result is what a read-only command answers (it records no facts).
	Result json.RawMessage
}

// Ledger is the logic of one entity type.
type Ledger interface {
	// Name identifies the implementation (the manifest's ledger key).
	Name() string
	// Decide returns the facts a command produces given the entity's
	// state, or a *BusinessError when the command is refused.
	Decide(ctx context.Context, state json.RawMessage, cmd Command) (Decision, error)
	// Evolve folds one recorded fact into the state.
	Evolve(ctx context.Context, state json.RawMessage, fact json.RawMessage) (json.RawMessage, error)
	// StateDependent reports whether Decide reads the state. When false the
	// host may append without pinning the entity version, which lets many
	// writers to one entity be batched.
	StateDependent() bool
}

// CommandSpec describes a command a ledger serves beyond the raw append.
type CommandSpec struct {
	Name        string
	Method      string // HTTP method of its route, "" when not routed
	Path        string // route below /v1/entities/:id, "" when not routed
	ReadOnly    bool
	Emits       []string
	Description string
	// InputSchema and ResultSchema are the JSON Schemas the plugin
	// describes for the input and a read-only command's result; nil when
	// it describes none.
	InputSchema, ResultSchema json.RawMessage
}

// Commander is implemented by ledgers that serve commands; the gateway
// mounts their routes under /v1/entities/:id.
type Commander interface {
	Commands() []CommandSpec
}

// Loader is implemented by ledgers that may not serve yet (a plugin still
// loading at start-up): NotReady returns the problem to answer meanwhile,
// or nil. Until then the ledger lists no commands, so a command path
// would otherwise look like one that does not exist.
type Loader interface {
	NotReady() error
}

// Registry resolves ledger names to implementations.
type Registry interface {
	Ledger(name string) (Ledger, bool)
}

// BusinessError is a refusal decided by a ledger: the request was
// well-formed but the entity's rules forbid it. It becomes a 422 problem.
type BusinessError struct {
	Code    string
	Message string
}

func (e *BusinessError) Error() string { return e.Code + ": " + e.Message }

// ErrUnknownCommand is returned by Decide for commands the ledger does not
// serve.
var ErrUnknownCommand = errors.New("unknown command")

// CommandAppend is the command of a raw fact append (POST /v1/facts and
// the gateway's emit action).
const CommandAppend = "append"

// AppendInput is the input of CommandAppend.
type AppendInput struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype,omitempty"`
	Timestamp int64           `json:"timestamp,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// Generic is the built-in ledger: it records exactly the fact it is asked
// to append (the host has already checked the fact type against the domain
// manifest) and keeps no state.
type Generic struct{}

// GenericName is the manifest's ledger key for [Generic]. (The WebAssembly
// plugin that serves entity types generically is called "generic"; this
// in-process one is the fallback every type can use.)
const GenericName = "builtin"

var _ Ledger = Generic{}

// Name implements Ledger.
func (Generic) Name() string { return GenericName }

// StateDependent implements Ledger.
func (Generic) StateDependent() bool { return false }

// Decide implements Ledger.
func (Generic) Decide(_ context.Context, _ json.RawMessage, cmd Command) (Decision, error) {
	if cmd.Name != CommandAppend {
		return Decision{}, fmt.Errorf("%w %q", ErrUnknownCommand, cmd.Name)
	}
	var in AppendInput
	if err := json.Unmarshal(cmd.Input, &in); err != nil {
		return Decision{}, fmt.Errorf("generic ledger: decode append: %w", err)
	}
	return Decision{Facts: []NewFact{{Type: in.Type, Subtype: in.Subtype, Timestamp: in.Timestamp, Data: in.Data}}}, nil
}

// Evolve implements Ledger.
func (Generic) Evolve(_ context.Context, state json.RawMessage, _ json.RawMessage) (json.RawMessage, error) {
	return state, nil
}

// Static is a Registry backed by a map.
type Static map[string]Ledger

// Ledger implements Registry.
func (s Static) Ledger(name string) (Ledger, bool) {
	l, ok := s[name]
	return l, ok
}

// Builtin returns the registry of built-in ledgers.
func Builtin() Static { return Static{GenericName: Generic{}} }

// Fallback is a Registry that serves every name it does not know with the
// built-in generic ledger (tools and tests that run without plugins).
type Fallback struct{ Static }

// Ledger implements Registry.
func (f Fallback) Ledger(name string) (Ledger, bool) {
	if l, ok := f.Static.Ledger(name); ok {
		return l, true
	}
	return Generic{}, true
}
