// Package abi holds the message types and constants of the Factline plugin
// ABI (see sdk/ABI.md). The host and the Go guest SDK both use it, so the
// two sides cannot disagree on a field name. It has no dependencies beyond
// the standard library and compiles for wasip1.
package abi

import "encoding/json"

// Version is the ABI version this package describes.
const Version = 1

// Export names.
const (
	ExportVersion  = "factline_abi_version"
	ExportAlloc    = "factline_alloc"
	ExportFree     = "factline_free"
	ExportDescribe = "factline_describe"
	ExportDecide   = "factline_decide"
	ExportEvolve   = "factline_evolve"
	ExportHandle   = "factline_handle"
	ExportInit     = "_initialize"
)

// HostModule is the import module of host functions.
const HostModule = "factline"

// Status is the first byte of every output.
type Status byte

// Statuses.
const (
	StatusOK             Status = 0
	StatusBusinessError  Status = 1
	StatusBadInput       Status = 2
	StatusUnknownCommand Status = 3
	StatusUnsupported    Status = 4
	StatusPanic          Status = 5
)

// Kinds of plugin.
const (
	KindLedger       = "ledger"
	KindSubscription = "subscription"
)

// CommandAppend is the built-in raw-append command sent to every ledger.
const CommandAppend = "append"

// AnyFactType, as a ledger's only emits entry (top level or a command's),
// declares that it records any fact type the domain manifest declares for
// the entity's type. The host refuses other fact types before a decision
// and checks every decided fact again.
const AnyFactType = "*"

// EmitsType reports whether an emits list allows the fact type t.
func EmitsType(emits []string, t string) bool {
	for _, e := range emits {
		if e == t || e == AnyFactType {
			return true
		}
	}
	return false
}

// Description is the describe result.
type Description struct {
	ABI         int       `json:"abi"`
	Name        string    `json:"name"`
	Version     string    `json:"version"`
	Kind        string    `json:"kind"`
	EntityTypes []string  `json:"entity_types,omitempty"`
	Handlers    []string  `json:"handlers,omitempty"`
	Commands    []Command `json:"commands,omitempty"`
	Emits       []string  `json:"emits,omitempty"`
}

// Command is a command a ledger serves; with a Path it is mounted as an
// HTTP route under /v1/entities/:id.
type Command struct {
	Name        string   `json:"name"`
	Method      string   `json:"method,omitempty"`
	Path        string   `json:"path,omitempty"`
	Emits       []string `json:"emits,omitempty"`
	ReadOnly    bool     `json:"read_only,omitempty"`
	Description string   `json:"description,omitempty"`
	// InputSchema and ResultSchema are JSON Schemas (objects) of the
	// command's input and of a read-only command's result; absent, any
	// JSON value is described.
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	ResultSchema json.RawMessage `json:"result_schema,omitempty"`
}

// EntityRef identifies the entity a decision is about.
type EntityRef struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	TenantID string `json:"tenant_id"`
	Version  int64  `json:"version"`
}

// DecideInput is the input of factline_decide.
type DecideInput struct {
	Command string          `json:"command"`
	Entity  EntityRef       `json:"entity"`
	State   json.RawMessage `json:"state"`
	Input   json.RawMessage `json:"input"`
	Now     int64           `json:"now"`
}

// NewFact is a fact a ledger decided.
type NewFact struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Timestamp int64           `json:"timestamp,omitempty"`
}

// DecideResult is the result of factline_decide.
type DecideResult struct {
	Facts  []NewFact       `json:"facts,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Fact is a recorded fact as plugins see it.
type Fact struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Subtype    string          `json:"subtype,omitempty"`
	TenantID   string          `json:"tenant_id,omitempty"`
	EntityID   string          `json:"entity_id,omitempty"`
	EntityType string          `json:"entity_type,omitempty"`
	Seq        int64           `json:"seq,omitempty"`
	Position   int64           `json:"position,omitempty"`
	SourceID   string          `json:"source_id,omitempty"`
	Timestamp  int64           `json:"timestamp"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// EvolveInput is the input of factline_evolve; its result is the new
// state.
type EvolveInput struct {
	State json.RawMessage `json:"state"`
	Fact  Fact            `json:"fact"`
}

// HandleInput is the input of factline_handle.
type HandleInput struct {
	Handler string `json:"handler"`
	Fact    Fact   `json:"fact"`
}

// Action is something a subscription handler asks the host to do.
type Action struct {
	Kind     string          `json:"kind"` // "append"
	EntityID string          `json:"entity_id"`
	Type     string          `json:"type"`
	Subtype  string          `json:"subtype,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// ActionAppend appends a fact to an entity of the same tenant.
const ActionAppend = "append"

// HandleResult is the result of factline_handle.
type HandleResult struct {
	Actions []Action `json:"actions,omitempty"`
}

// ErrorReply follows a non-zero status.
type ErrorReply struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Pack packs a pointer and a length into an export's i64 result.
func Pack(ptr, length uint32) uint64 { return uint64(ptr)<<32 | uint64(length) }

// Unpack reverses Pack.
func Unpack(v uint64) (ptr, length uint32) { return uint32(v >> 32), uint32(v) }
