// Package store defines the persistence boundary of Factline: entities,
// facts, configs, API keys, idempotency records, stream checkpoints, plugin
// binaries and the webhook outbox.
//
// Two implementations satisfy [Store]: internal/host/store/postgres (pgx v5) and
// internal/host/store/sqlite (the embedded default). Both are run through the same
// conformance suite in internal/host/store/storetest so they cannot drift.
//
// The store is deliberately dumb: it enforces storage invariants (tenant
// scoping, per-entity sequence numbers without gaps, a gapless global fact
// position in commit order, optimistic concurrency on entity versions,
// immutable config versions) and leaves business rules to internal/host/platform.
// Every method is scoped by tenant where the data is tenant-owned; a row of
// another tenant is reported as [ErrNotFound], never returned.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors callers branch on. Implementations wrap them with context; test
// with errors.Is.
var (
	// ErrNotFound: the row does not exist in the caller's tenant.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a row with the same key exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrVersionConflict: an expected version did not match the current one.
	ErrVersionConflict = errors.New("version conflict")
	// ErrArchived: the config is archived and cannot take a new version.
	ErrArchived = errors.New("archived")
	// ErrUnavailable: the database cannot be reached or refuses work for
	// now (connection refused or lost, server shutting down, the embedded
	// file locked past its timeout). Retrying later may succeed; the cause
	// stays in the chain.
	ErrUnavailable = errors.New("database unavailable")
	// ErrReadOnly: the database answers but takes no writes now (a
	// standby after a failover, default_transaction_read_only, a disk
	// full or out of space). It comes with ErrUnavailable in the chain.
	ErrReadOnly = errors.New("the database takes no writes")
	// ErrOutcomeUnknown: a write's commit was sent and no answer came
	// back (the connection failed or the deadline passed while
	// committing), so the write may or may not be stored. It comes with
	// ErrUnavailable or a timeout in the chain.
	ErrOutcomeUnknown = errors.New("the commit's outcome is unknown")

	// ErrSecretKeyMismatch: the database's webhook secrets are encrypted
	// with another key than the one given.
	ErrSecretKeyMismatch = errors.New("webhook secrets are encrypted with another key")
)

// Slot counts fixed by the contract's stored entity row (README.md,
// "Adding an entity type at runtime").
const (
	StringSlots = 10 // ix_s_1 .. ix_s_10
	NumberSlots = 5  // ix_n_1 .. ix_n_5
)

// Slots holds the indexed copies of entity fields. S[0] is ix_s_1, N[0] is
// ix_n_1. A nil pointer stores SQL NULL.
type Slots struct {
	S [StringSlots]*string
	N [NumberSlots]*float64
}

// Entity is the stored entity row.
type Entity struct {
	TenantID string
	ID       string
	Type     string
	// Version starts at 1 on creation and increases by one with every
	// appended fact and every update.
	Version int64
	// Data is the JSON object of the entity's domain fields.
	Data json.RawMessage
	// Metadata is a free-form JSON object; nil when absent.
	Metadata json.RawMessage
	// State is the ledger's folded state (a disposable snapshot that can be
	// rebuilt from the entity's facts); nil when the ledger keeps none.
	State     json.RawMessage
	Slots     Slots
	CreatedAt int64 // ms since epoch
	UpdatedAt int64 // ms since epoch
}

// EntityUpdate replaces the mutable parts of an entity when its version is
// still ExpectedVersion. The stored version becomes ExpectedVersion+1.
type EntityUpdate struct {
	TenantID        string
	ID              string
	ExpectedVersion int64
	Data            json.RawMessage
	Metadata        json.RawMessage // nil keeps the stored metadata
	Slots           Slots
	UpdatedAt       int64
}

// SlotFilter restricts a listing to entities whose slot equals Value.
// Slot is a column name such as "ix_s_2" or "ix_n_1"; Value is a string for
// ix_s_* and a float64 for ix_n_*. Implementations reject other names.
type SlotFilter struct {
	Slot  string
	Value any
}

// EntityFilter selects entities of one type in one tenant, ordered by id.
type EntityFilter struct {
	TenantID string
	Type     string
	Where    []SlotFilter
	// AfterID is the keyset cursor: only ids strictly greater are returned.
	AfterID string
	// Limit is the maximum number of rows; callers enforce bounds.
	Limit int
}

// Fact is an immutable record in an entity's ledger.
type Fact struct {
	ID         string
	TenantID   string
	EntityID   string // empty for facts not bound to an entity
	EntityType string // filled by the store from the entity row
	// Seq is the position in the entity's ledger: 1, 2, 3 ... without gaps.
	// Zero for facts not bound to an entity.
	Seq int64
	// Position is the global position: 1, 2, 3 ... without gaps, in commit
	// order across all tenants. Stream consumers checkpoint on it.
	Position  int64
	Type      string
	Subtype   string
	SourceID  string
	TraceID   string
	Timestamp int64 // ms since epoch: when it happened
	Data      json.RawMessage
	CreatedAt int64 // ms since epoch: when it was recorded
}

// FactScan selects facts of one tenant by type, entity type and time.
type FactScan struct {
	TenantID string
	// Types are the fact types wanted; at least one.
	Types []string
	// EntityType, when set, keeps only facts of entities of that type.
	EntityType string
	// From and To bound Timestamp, inclusive; 0 leaves that end open.
	From, To int64
}

// FactFilter selects facts of one tenant for ListFacts. Every set field
// must match; the zero value of a field leaves it open.
type FactFilter struct {
	TenantID string
	Type     string
	// Subtype is only used with Type.
	Subtype  string
	SourceID string
	EntityID string
	// From and To bound Timestamp, inclusive; 0 leaves that end open.
	From, To int64
	// AfterPosition keeps facts with Position > AfterPosition (a cursor).
	AfterPosition int64
	Limit         int
}

// Append is one fact to append. Fact.ID, TenantID, Type, Timestamp, Data and
// CreatedAt are set by the caller; Seq, Position and EntityType are assigned
// by the store.
type Append struct {
	Fact Fact
	// ExpectedVersion, when non-zero, must equal the entity's current
	// version (before this append) or the item fails with
	// ErrVersionConflict.
	ExpectedVersion int64
	// State, when non-nil, replaces the entity's stored State snapshot in
	// the same transaction as the fact.
	State json.RawMessage
	// Outbox, when non-nil, is inserted into the webhook outbox in the same
	// transaction, only when this item succeeds. Its DeliveryID must be
	// new (else the whole call fails).
	Outbox *OutboxRow
	// FreshID says Fact.ID was generated for this append (a new random
	// id, not one a caller chose): the store does not look it up among the
	// stored ids, and should it be taken after all, the whole call fails
	// with ErrAlreadyExists.
	FreshID bool
}

// AppendResult reports one item of an AppendFacts batch.
type AppendResult struct {
	Fact Fact // with Seq, Position and EntityType assigned
	// EntityVersion is the entity's version after this append (0 for
	// entity-less facts).
	EntityVersion int64
	// Err is ErrNotFound (entity missing in the tenant), ErrVersionConflict
	// or ErrAlreadyExists (duplicate fact id); such an item wrote nothing.
	Err error
}

// Config is one immutable version of a versioned setting.
type Config struct {
	TenantID  string
	ID        string
	Version   int64
	Type      string
	Name      string
	ScopeType string
	ScopeID   string
	Settings  json.RawMessage
	// Status is "active" or "archived".
	Status       string
	SupersededAt *int64
	EffectiveAt  int64
	CreatedAt    int64
}

// Config statuses.
const (
	ConfigActive   = "active"
	ConfigArchived = "archived"
)

// ConfigFilter selects the current versions of configs in one tenant.
type ConfigFilter struct {
	TenantID string
	Type     string // empty: any type
	Status   string // empty: any status
	AfterID  string
	Limit    int
}

// APIKey is a stored API key. The key itself is never stored, only Hash.
type APIKey struct {
	ID        string
	TenantID  string
	Mode      string // live, test or admin
	Name      string
	Prefix    string // the first characters of the key, for display
	Hash      string // hex SHA-256 of the full key
	CreatedAt int64
	RevokedAt *int64
}

// Idempotency record states.
const (
	IdemInFlight = "in_flight"
	IdemDone     = "done"
)

// IdemKey identifies an idempotency record.
type IdemKey struct {
	TenantID string
	Scope    string // the operation, for example "POST /v1/entities"
	Key      string // the client's Idempotency-Key header
}

// IdemRecord is a stored idempotency record.
type IdemRecord struct {
	IdemKey
	RequestHash string
	State       string // IdemInFlight or IdemDone
	StatusCode  int
	Body        []byte
	// Headers carries response headers worth replaying (for example
	// Location), JSON-encoded; nil when none.
	Headers     json.RawMessage
	LockedUntil int64 // ms: an in-flight record past this is abandoned
	CreatedAt   int64
	ExpiresAt   int64 // ms: the record is ignored and purgeable after this
}

// IdemBegin starts an idempotent operation.
type IdemBegin struct {
	IdemKey
	RequestHash string
	Now         int64
	LockedUntil int64
	ExpiresAt   int64
}

// Store is the whole persistence boundary.
type Store interface {
	EntityStore
	FactStore
	ConfigStore
	KeyStore
	IdempotencyStore
	CheckpointStore
	PluginStore
	WebhookStore
	DomainUsageStore
	SessionStore

	// Ping checks that the backing database answers and takes writes.
	Ping(ctx context.Context) error
	// Backend names the implementation: "postgres" or "sqlite".
	Backend() string
	// Close releases connections and stops listeners.
	Close() error
}

// EntityStore persists entity rows.
type EntityStore interface {
	// CreateEntity inserts e with Version 1. ErrAlreadyExists when the
	// tenant already has an entity with e.ID.
	CreateEntity(ctx context.Context, e *Entity) error
	// GetEntity returns the entity or ErrNotFound.
	GetEntity(ctx context.Context, tenantID, id string) (*Entity, error)
	// UpdateEntity applies u when the version still matches and returns the
	// updated row. ErrNotFound or ErrVersionConflict; on error nothing
	// changes.
	UpdateEntity(ctx context.Context, u EntityUpdate) (*Entity, error)
	// ListEntities returns up to f.Limit entities ordered by id ascending.
	ListEntities(ctx context.Context, f EntityFilter) ([]Entity, error)
	// SetEntityState overwrites the State snapshot without changing the
	// version (used when snapshots are rebuilt by replaying facts).
	SetEntityState(ctx context.Context, tenantID, id string, state json.RawMessage) error
}

// FactStore persists the append-only fact log. Facts are never updated or
// deleted.
type FactStore interface {
	// AppendFacts applies the items in order inside one transaction. Each
	// item succeeds or fails on its own (see AppendResult.Err); a failed
	// item writes nothing and does not affect the others. The returned
	// error is non-nil only when the transaction as a whole failed, in
	// which case nothing was written.
	//
	// Appends are serialised on the global position counter, so positions
	// are gapless and commit order equals position order: a consumer that
	// has read position p will never later see a new fact below p.
	AppendFacts(ctx context.Context, items []Append) ([]AppendResult, error)
	// GetFact returns the fact or ErrNotFound.
	GetFact(ctx context.Context, tenantID, id string) (*Fact, error)
	// ListEntityFacts returns facts of one entity with Seq > afterSeq in
	// Seq order, at most limit of them.
	ListEntityFacts(ctx context.Context, tenantID, entityID string, afterSeq int64, limit int) ([]Fact, error)
	// ListFacts returns the tenant's facts f selects, in position (commit)
	// order, at most f.Limit of them. An index serves each filter: a
	// listing never scans other tenants' facts, nor the tenant's whole
	// ledger when a type, source or entity is given.
	ListFacts(ctx context.Context, f FactFilter) ([]Fact, error)
	// ReadFacts returns facts of all tenants with Position > after, in
	// position order, at most limit of them. It feeds stream consumers.
	ReadFacts(ctx context.Context, after int64, limit int) ([]Fact, error)
	// ScanFacts calls fn for every fact of one tenant that q selects, in
	// timestamp order (position order among equal timestamps), and stops
	// at fn's first error, which it returns. It feeds compute-mode
	// projection queries; fn must not call the store.
	ScanFacts(ctx context.Context, q FactScan, fn func(*Fact) error) error
	// HeadPosition returns the highest committed position (0 when empty).
	HeadPosition(ctx context.Context) (int64, error)
	// SubscribeFacts returns a channel that receives a value (coalesced,
	// never blocking the writer) after facts are committed, by any process
	// sharing the database for Postgres. The channel closes when ctx ends.
	SubscribeFacts(ctx context.Context) (<-chan struct{}, error)
}

// ConfigStore persists versioned configs. Every version is its own row; only
// Status and SupersededAt of a stored version ever change.
type ConfigStore interface {
	// CreateConfig inserts version 1. ErrAlreadyExists on a duplicate id.
	CreateConfig(ctx context.Context, c *Config) error
	// GetConfig returns the latest version or ErrNotFound.
	GetConfig(ctx context.Context, tenantID, id string) (*Config, error)
	// GetConfigVersion returns one version or ErrNotFound.
	GetConfigVersion(ctx context.Context, tenantID, id string, version int64) (*Config, error)
	// ListConfigVersions returns every version ascending, or ErrNotFound.
	ListConfigVersions(ctx context.Context, tenantID, id string) ([]Config, error)
	// PutConfigVersion inserts c as version c.Version, which must be the
	// latest version plus one (else ErrVersionConflict); the latest must be
	// active (else ErrArchived). The previous version gets SupersededAt =
	// c.CreatedAt in the same transaction.
	PutConfigVersion(ctx context.Context, c *Config) error
	// ArchiveConfig sets Status archived on the latest version and returns
	// it. Archiving an archived config returns it unchanged.
	ArchiveConfig(ctx context.Context, tenantID, id string, now int64) (*Config, error)
	// ListConfigs returns the latest version of each config matching f,
	// ordered by id.
	ListConfigs(ctx context.Context, f ConfigFilter) ([]Config, error)
	// ListActiveConfigsByType returns the latest active version of every
	// config of the given type across all tenants, ordered by tenant and
	// id. It feeds engines that serve every tenant (projections, webhooks).
	ListActiveConfigsByType(ctx context.Context, typ string) ([]Config, error)
}

// KeyStore persists API keys.
type KeyStore interface {
	// CreateAPIKey inserts k. ErrAlreadyExists on a duplicate id or hash.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// GetAPIKeyByHash returns the key with that hash (revoked or not) or
	// ErrNotFound.
	GetAPIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	// RevokeAPIKey sets RevokedAt on the key with that id, or ErrNotFound.
	RevokeAPIKey(ctx context.Context, id string, now int64) error
	// ListAPIKeys lists keys of one tenant, or of all tenants when tenantID
	// is empty, ordered by id.
	ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error)
}

// IdempotencyStore persists Idempotency-Key records.
type IdempotencyStore interface {
	// BeginIdempotency claims the key. When there is no live record (none,
	// or one past ExpiresAt), or an in-flight one past LockedUntil, it
	// writes an in-flight record and returns (nil, true). Otherwise it
	// returns the existing record and false. Concurrent callers with the
	// same key: exactly one gets true.
	BeginIdempotency(ctx context.Context, b IdemBegin) (*IdemRecord, bool, error)
	// CompleteIdempotency stores the response and marks the record done.
	CompleteIdempotency(ctx context.Context, k IdemKey, status int, body []byte, headers json.RawMessage) error
	// ReleaseIdempotency deletes an in-flight record so the key can be
	// retried (used when the operation failed without a stored response),
	// if it is still the claim that set lockedUntil: a claim taken over
	// after its lock passed is the new claimant's. It reports whether it
	// deleted the record.
	ReleaseIdempotency(ctx context.Context, k IdemKey, lockedUntil int64) (bool, error)
	// PurgeIdempotency deletes records expired at now and returns how many.
	PurgeIdempotency(ctx context.Context, now int64) (int64, error)
}

// CheckpointStore persists the positions of named stream consumers.
type CheckpointStore interface {
	// GetCheckpoint returns the consumer's position, 0 when it has none.
	GetCheckpoint(ctx context.Context, consumer string) (int64, error)
	// SetCheckpoint stores the consumer's position.
	SetCheckpoint(ctx context.Context, consumer string, position int64) error
	// SetCheckpoints stores the positions of many consumers in one
	// write: all of them or, on error, none.
	SetCheckpoints(ctx context.Context, positions map[string]int64) error
	// ListCheckpoints returns every consumer's position.
	ListCheckpoints(ctx context.Context) (map[string]int64, error)
	// DeleteCheckpoint forgets a consumer that will not run again; a
	// consumer without a checkpoint is no error.
	DeleteCheckpoint(ctx context.Context, consumer string) error
}

// PluginBinary is one stored version of a WebAssembly plugin.
type PluginBinary struct {
	Name      string
	SHA256    string // hex SHA-256 of Wasm: the version's identity
	Version   string // the plugin's own version string (describe)
	Wasm      []byte
	CreatedAt int64
}

// ActivePlugin says which version of a plugin every process should run.
type ActivePlugin struct {
	Name     string
	SHA256   string
	Previous string // the version active before, "" when none
	// PreviousVersion is Previous's own version string (describe), so
	// that a process can name it without reading its binary.
	PreviousVersion string
	UpdatedAt       int64
}

// PluginActivation is the active row an activation leaves.
type PluginActivation struct {
	ActivePlugin
	// Changed is false when the version was active already: the store, not
	// the process that asked, says whether an install changed anything.
	Changed bool
}

// PluginStore keeps plugin binaries, so every gateway process sharing a
// database converges on the same versions.
type PluginStore interface {
	// SavePluginVersion stores a binary; saving the same name and SHA256
	// again is a no-op.
	SavePluginVersion(ctx context.Context, p *PluginBinary) error
	// GetPluginVersion returns one stored binary or ErrNotFound.
	GetPluginVersion(ctx context.Context, name, sha256 string) (*PluginBinary, error)
	// ActivatePlugin makes a stored version the active one (the version
	// active before becomes Previous) and returns the row as stored: what
	// a process that applies the change takes as its previous version.
	// Activating the active version changes nothing (Changed false), its
	// Previous included. ErrNotFound when that version is not stored.
	ActivatePlugin(ctx context.Context, name, sha256 string, now int64) (*PluginActivation, error)
	// ActivatePluginIf is ActivatePlugin done only while expected is the
	// active version ("": while the plugin has none), checked in the same
	// transaction as the write: a rollback read the version it undoes
	// before, and must not undo another process's change made meanwhile.
	// ErrVersionConflict, changing nothing, when the active version is
	// another one.
	ActivatePluginIf(ctx context.Context, name, sha256, expected string, now int64) (*PluginActivation, error)
	// ActivePlugins lists the active version of every plugin, by name.
	ActivePlugins(ctx context.Context) ([]ActivePlugin, error)
}

// TypeUsage describes the stored entities of one entity type across all
// tenants: what a domain change must not contradict.
type TypeUsage struct {
	Entities int64
	// Keys counts, per top-level key of the entities' data, the entities
	// whose data has it.
	Keys map[string]int64
	// Slots counts, per index slot column ("ix_s_1"), the entities with a
	// value in it.
	Slots map[string]int64
}

// DomainUsageStore answers the questions a domain model change asks of the
// stored data. Both scan, across tenants: they run when the model changes,
// not per request.
type DomainUsageStore interface {
	// EntityTypeUsage describes the stored entities of a type.
	EntityTypeUsage(ctx context.Context, entityType string) (*TypeUsage, error)
	// EntityTypeCounts counts the stored entities of each type, across
	// tenants. It reads every entity row: for a check at start, not for
	// requests.
	EntityTypeCounts(ctx context.Context) (map[string]int64, error)
	// FactTypeInUse reports whether a fact of factType is recorded on an
	// entity of entityType.
	FactTypeInUse(ctx context.Context, entityType, factType string) (bool, error)
	// FactTypeKeys counts, per top-level key of the data of the facts of
	// factType recorded on entities of entityType, the facts that have it.
	FactTypeKeys(ctx context.Context, entityType, factType string) (map[string]int64, error)

	// PutDomainLayer stores a domain manifest installed through the admin
	// API, replacing one of the same name, if the stored manifests are
	// still those whose LayersDigest is expect (else ErrVersionConflict,
	// and nothing is written): a change is checked against the model the
	// caller read, so two processes changing the domain at once cannot
	// both pass their checks against models the other has changed.
	PutDomainLayer(ctx context.Context, l *DomainLayer, expect string) error
	// ListDomainLayers lists the stored domain manifests by name.
	ListDomainLayers(ctx context.Context) ([]DomainLayer, error)
	// DeleteDomainLayer removes one, under the same condition as
	// PutDomainLayer; ErrNotFound when there is none.
	DeleteDomainLayer(ctx context.Context, name, expect string) error
}

// SessionStore persists operator console sessions, so every process
// sharing the database serves a session signed in through another.
type SessionStore interface {
	// CreateSession inserts s; ErrAlreadyExists on a taken id.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns the session with that id unless it expired at
	// now; ErrNotFound otherwise.
	GetSession(ctx context.Context, id string, now int64) (*Session, error)
	// DeleteSession removes one session; deleting a missing one is not an
	// error (signing out twice is harmless).
	DeleteSession(ctx context.Context, id string) error
	// PurgeSessions deletes sessions expired at now and returns how many.
	PurgeSessions(ctx context.Context, now int64) (int64, error)
}

// Session is a console session. ID is the SHA-256 (hex) of the cookie's
// token, so the table alone does not let anyone in; Key is the API key the
// session acts with, sealed with the process's secret key.
type Session struct {
	ID        string
	TenantID  string
	Mode      string
	KeyID     string
	Key       []byte // sealed API key
	CSRF      string // synchronizer token bound to the session
	CreatedAt int64  // unix ms
	ExpiresAt int64  // unix ms
}

// DomainLayer is a domain manifest stored in the database: every process
// sharing it layers the stored manifests, by name, over its own.
type DomainLayer struct {
	Name      string
	Source    []byte // YAML or JSON, as uploaded
	SHA256    string
	UpdatedAt int64
}

// LayersDigest identifies a set of stored domain manifests (by name and
// content), as ListDomainLayers lists them.
func LayersDigest(layers []DomainLayer) string {
	h := sha256.New()
	for _, l := range layers {
		fmt.Fprintf(h, "%s\x00%s\x00", l.Name, l.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SlotColumns lists every slot column, string slots first.
func SlotColumns() []string {
	var out []string
	for i := 0; i < StringSlots; i++ {
		out = append(out, SlotColumn(i, false))
	}
	for i := 0; i < NumberSlots; i++ {
		out = append(out, SlotColumn(i, true))
	}
	return out
}

// SlotColumn returns the column name of string slot i (0-based), or of
// number slot i when number is true.
func SlotColumn(i int, number bool) string {
	if number {
		return "ix_n_" + strconv.Itoa(i+1)
	}
	return "ix_s_" + strconv.Itoa(i+1)
}

// ParseSlotColumn maps "ix_s_3" to (2, false, true) and "ix_n_1" to
// (0, true, true); anything else gives ok false.
func ParseSlotColumn(col string) (idx int, number bool, ok bool) {
	rest, isString := strings.CutPrefix(col, "ix_s_")
	max := StringSlots
	if !isString {
		var isNumber bool
		if rest, isNumber = strings.CutPrefix(col, "ix_n_"); !isNumber {
			return 0, false, false
		}
		number, max = true, NumberSlots
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || n > max || strconv.Itoa(n) != rest {
		return 0, false, false
	}
	return n - 1, number, true
}

// Hooks are test seams for the shared suite; production code leaves them
// nil.
type Hooks struct {
	// BeforeAppendCommit runs inside AppendFacts after every item is written
	// and before the transaction commits.
	BeforeAppendCommit func(ctx context.Context)
}

// Webhook outbox statuses (the webhook contract's outbox states).
const (
	OutboxPending = "pending"
	OutboxSent    = "sent"
	OutboxDead    = "dead"
)

// OutboxRow is one webhook delivery in the outbox. The store keeps it and
// enforces the claim and status preconditions of [WebhookStore]; what the
// fields mean for delivery is internal/host/webhook's business.
type OutboxRow struct {
	DeliveryID      string
	TenantID        string
	TriggeredFactID string // the webhook.triggered fact the row is inserted with
	ConfigID        string
	ConfigVersion   int64
	CampaignID      string
	// Endpoint groups deliveries by receiver (scheme://host:port) for the
	// per-endpoint limit of a claim.
	Endpoint    string
	Status      string // OutboxPending, OutboxSent or OutboxDead
	Attempt     int    // the attempt to make next (pending) or the last one made
	MaxAttempts int
	// TimeoutSeconds is the per-attempt timeout; leases are sized by it.
	TimeoutSeconds int
	// SigTimestamp is the signature timestamp (Unix seconds), fixed when
	// the delivery is created and renewed only by a replay.
	SigTimestamp int64
	// Payload is the exact body that is signed and sent; stored as text so
	// not a byte changes.
	Payload []byte
	// Message is a JSON object with the delivery's settings (URL, secret
	// reference, timeout, retry and header settings of the pinned config
	// version).
	Message json.RawMessage
	// NextAttemptAt (ms) is when a pending row becomes due.
	NextAttemptAt int64
	// ClaimedUntil (ms) is the end of the current lease; 0 when unclaimed.
	ClaimedUntil int64
	ClaimToken   string
	// AttemptStartedAt (ms) is set when a claim starts an attempt and
	// cleared by the change that records its outcome. A row claimed while
	// it is still set holds an attempt that was cut short (see
	// OutboxClaim.Interrupted).
	AttemptStartedAt int64
	FirstAttemptAt   int64 // ms; 0 before the first attempt
	LastAttemptAt    int64 // ms; 0 before the first attempt
	LastStatusCode   int
	// DeadLetter is the dead-letter message while Status is dead.
	DeadLetter   json.RawMessage
	DLQMessageID string
	DeadAt       int64 // ms; 0 unless dead
	Replays      int   // manual replays so far
	CreatedAt    int64
	UpdatedAt    int64
}

// OutboxClaim is a row handed out by ClaimOutbox.
type OutboxClaim struct {
	OutboxRow
	// Interrupted is the AttemptStartedAt the row had before this claim:
	// non-zero means an earlier claim started attempt Row.Attempt and its
	// lease ran out without an outcome (a crashed or stalled worker).
	Interrupted int64
}

// ClaimRequest asks for due outbox rows.
type ClaimRequest struct {
	Now   int64  // ms
	Token string // identifies this claim; later changes must present it
	// Limit is the most rows returned.
	Limit int
	// PerEndpoint, when positive, is the most rows of one Endpoint
	// returned.
	PerEndpoint int
	// SkipEndpoints are endpoints whose rows are not claimed (the caller
	// has no capacity for them).
	SkipEndpoints []string
	// DueFrom, when non-zero, restricts the claim to rows with
	// NextAttemptAt >= DueFrom: a hint that lets a busy queue's claims
	// start past the rows finished since the last vacuum.
	DueFrom int64
	// LeaseFactorMS and LeaseMarginMS set each row's lease:
	// ClaimedUntil = Now + LeaseFactorMS*timeout_seconds + LeaseMarginMS,
	// where timeout_seconds is the row's TimeoutSeconds.
	LeaseFactorMS int64
	LeaseMarginMS int64
}

// OutboxChange changes one outbox row and appends facts in the same
// transaction. The row is identified by Row.TenantID and Row.DeliveryID;
// every mutable column takes the value in Row (Status, Attempt,
// SigTimestamp, NextAttemptAt, ClaimedUntil, ClaimToken, AttemptStartedAt,
// FirstAttemptAt, LastAttemptAt, LastStatusCode, DeadLetter, DLQMessageID,
// DeadAt, Replays, UpdatedAt).
type OutboxChange struct {
	Row OutboxRow
	// ClaimToken, when non-empty, must be the row's current claim token.
	ClaimToken string
	// FromStatus, when non-empty, must be the row's current status.
	FromStatus string
	// Facts are entity-less facts appended with the change (audit facts).
	Facts []Fact
	// Pause, when non-nil, pauses the config in the same transaction (a
	// pause already in place is kept).
	Pause *WebhookPause
}

// OutboxFilter selects outbox rows of one tenant, ordered by delivery id.
type OutboxFilter struct {
	TenantID string
	Status   string // empty: any
	ConfigID string // empty: any
	// CreatedFrom and CreatedBefore (ms) bound CreatedAt: From <= CreatedAt
	// < Before; 0: unbounded.
	CreatedFrom   int64
	CreatedBefore int64
	AfterID       string
	Limit         int
}

// WebhookPause stops deliveries of one config until it is resumed.
type WebhookPause struct {
	TenantID   string
	ConfigID   string
	DeliveryID string // the delivery whose answer paused it
	Reason     string
	PausedAt   int64
}

// WebhookSecret is an encrypted webhook signing secret.
type WebhookSecret struct {
	TenantID   string
	Ref        string
	Ciphertext []byte
	KeyID      string // identifies the encryption key
	CreatedAt  int64
	ExpiresAt  *int64 // nil: does not expire
}

// OutboxDepths counts outbox rows by status across tenants.
type OutboxDepths struct {
	Pending int64
	Dead    int64
}

// WebhookStore persists webhook deliveries (the outbox), pauses and
// secrets. Rows are created by [FactStore.AppendFacts] through
// Append.Outbox, in the transaction of their webhook.triggered fact.
type WebhookStore interface {
	// ClaimOutbox leases due rows: status pending, NextAttemptAt <= Now,
	// no live lease (ClaimedUntil <= Now) and config not paused, oldest
	// NextAttemptAt first. Each claimed row gets ClaimToken, the lease and
	// AttemptStartedAt = Now. Concurrent claims (from any process) never
	// return the same row while its lease lasts.
	ClaimOutbox(ctx context.Context, req ClaimRequest) ([]OutboxClaim, error)
	// ChangeOutbox applies the changes in order inside one transaction;
	// each succeeds or fails on its own (ErrNotFound: no such row;
	// ErrVersionConflict: a precondition failed), and a failed change
	// writes nothing, neither the row nor its facts nor its pause. The
	// returned error is non-nil only when the whole transaction failed.
	ChangeOutbox(ctx context.Context, changes []OutboxChange) ([]error, error)
	// GetOutbox returns one row or ErrNotFound.
	GetOutbox(ctx context.Context, tenantID, deliveryID string) (*OutboxRow, error)
	// ListOutbox returns rows matching f ordered by delivery id.
	ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error)
	// CountOutbox counts pending and dead rows of all tenants.
	CountOutbox(ctx context.Context) (OutboxDepths, error)

	// GetWebhookPause returns the pause of a config or ErrNotFound.
	GetWebhookPause(ctx context.Context, tenantID, configID string) (*WebhookPause, error)
	// ResumeWebhookConfig removes the pause; ErrNotFound when none.
	ResumeWebhookConfig(ctx context.Context, tenantID, configID string) error
	// PauseWebhookConfig pauses a config without an outbox change (an
	// admin's pause); ErrAlreadyExists when it is paused already, the
	// existing pause kept.
	PauseWebhookConfig(ctx context.Context, p *WebhookPause) error
	// ListWebhookPauses returns the tenant's pauses ordered by config id.
	ListWebhookPauses(ctx context.Context, tenantID string) ([]WebhookPause, error)

	// CreateWebhookSecret inserts s; ErrAlreadyExists on a taken Ref. The
	// first secret records s.KeyID as the database's secret key; a secret
	// with another KeyID fails with ErrSecretKeyMismatch and writes nothing.
	CreateWebhookSecret(ctx context.Context, s *WebhookSecret) error
	// WebhookSecretKeyID returns the key id recorded by the first secret
	// (see CreateWebhookSecret), "" when there is none yet.
	WebhookSecretKeyID(ctx context.Context) (string, error)
	// GetWebhookSecret returns the secret (expired or not) or ErrNotFound.
	GetWebhookSecret(ctx context.Context, tenantID, ref string) (*WebhookSecret, error)
	// ExpireWebhookSecret sets ExpiresAt (keeping an earlier one), or
	// ErrNotFound.
	ExpireWebhookSecret(ctx context.Context, tenantID, ref string, at int64) error
}
