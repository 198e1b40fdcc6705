package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/tracing"
)

var factTypeRe = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// AppendFactInput is a fact to append to an entity's ledger.
type AppendFactInput struct {
	// ID, when set, is the fact's id (callers that must append at most
	// once derive it deterministically); a fact with that id already
	// recorded makes the append fail with ErrDuplicateFact.
	ID       string
	EntityID string
	Type     string
	Subtype  string
	SourceID string
	TraceID  string
	// Timestamp is when it happened (ms); zero means now.
	Timestamp int64
	// Data is the fact's JSON object; nil means {}.
	Data map[string]any
	// ExpectedVersion, when non-zero, pins the entity version the fact is
	// based on; a mismatch is a conflict and nothing is written.
	ExpectedVersion int64
}

// MaxFactTime is the latest fact timestamp, 9999-12-31T23:59:59.999Z in
// ms: projections bucket fact times by four-digit years, and a later fact
// would be counted by no time window.
const MaxFactTime = int64(253402300799999)

// MaxDecisionData bounds the data of the facts one decision records, in
// bytes as stored (numbers written out): the plugin's 4 MiB output.
const MaxDecisionData = 4 << 20

// Bounds on a raw fact's data, a ledger command input's: nesting (data
// itself is level 1) and object members at every level. A raw fact
// reaches every subscription handler and state-dependent ledger, and a
// document one of them cannot read would stall it on that fact.
const (
	MaxFactDataDepth = 32
	MaxFactDataKeys  = 1000
)

// Lengths of what the stores index. A database index entry has a size
// limit (about 2.7 KB on Postgres), so values kept in one are bounded
// well below it, the same on both stores: a longer value is a 400, not a
// failed write.
const (
	MaxSubtypeLength  = 64   // characters of a fact subtype
	MaxSourceIDLength = 256  // bytes of a fact's source_id
	MaxTraceIDLength  = 256  // bytes of a fact's trace_id (spans and webhook trace context carry it)
	MaxSlotLength     = 1024 // bytes of a string field kept in an index slot
)

// AppendFact appends one fact through the entity's ledger, on every path
// a client appends by (POST /v1/facts, a manifest's emit routes).
func (s *Service) AppendFact(ctx context.Context, tenant string, in AppendFactInput) (*store.Fact, error) {
	var errs []problem.FieldError
	if in.EntityID == "" {
		errs = append(errs, problem.FieldError{Field: "entity_id", Code: problem.CodeRequired, Message: "entity_id is required"})
	}
	switch {
	case in.Type == "":
		errs = append(errs, problem.FieldError{Field: "type", Code: problem.CodeRequired, Message: "type is required"})
	case !factTypeRe.MatchString(in.Type):
		errs = append(errs, problem.FieldError{Field: "type", Code: problem.CodeFormat, Message: "type must be a lowercase letter, then lowercase letters, digits and underscores"})
	}
	switch {
	case in.Subtype != "" && !factTypeRe.MatchString(in.Subtype):
		errs = append(errs, problem.FieldError{Field: "subtype", Code: problem.CodeFormat, Message: "subtype must be a lowercase letter, then lowercase letters, digits and underscores"})
	case len(in.Subtype) > MaxSubtypeLength:
		errs = append(errs, problem.FieldError{Field: "subtype", Code: problem.CodeRange, Message: fmt.Sprintf("subtype must be at most %d characters (got %d)", MaxSubtypeLength, len(in.Subtype))})
	}
	if len(in.SourceID) > MaxSourceIDLength {
		errs = append(errs, problem.FieldError{Field: "source_id", Code: problem.CodeRange, Message: fmt.Sprintf("source_id must be at most %d bytes (got %d)", MaxSourceIDLength, len(in.SourceID))})
	}
	if len(in.TraceID) > MaxTraceIDLength {
		errs = append(errs, problem.FieldError{Field: "trace_id", Code: problem.CodeRange, Message: fmt.Sprintf("trace_id must be at most %d bytes (got %d)", MaxTraceIDLength, len(in.TraceID))})
	}
	if in.Timestamp < 0 || in.Timestamp > MaxFactTime {
		errs = append(errs, problem.FieldError{Field: "timestamp", Code: problem.CodeRange, Message: fmt.Sprintf("timestamp must be milliseconds since the epoch, at most %d (9999-12-31T23:59:59.999Z)", MaxFactTime)})
	}
	if in.ExpectedVersion < 0 {
		errs = append(errs, problem.FieldError{Field: "expected_version", Code: problem.CodeRange, Message: "expected_version must be positive"})
	}
	var keys int
	switch depth := shapeOf(in.Data, 0, &keys); {
	case depth > MaxFactDataDepth:
		errs = append(errs, problem.FieldError{Field: "data", Code: problem.CodeRange, Message: fmt.Sprintf("data nests deeper than %d levels", MaxFactDataDepth)})
	case keys > MaxFactDataKeys:
		errs = append(errs, problem.FieldError{Field: "data", Code: problem.CodeRange, Message: fmt.Sprintf("data has more than %d keys", MaxFactDataKeys)})
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs)
	}
	e, mark, err := s.loadForWrite(ctx, tenant, in.EntityID)
	if err != nil {
		return nil, err
	}
	t, err := s.storedType(e)
	if err != nil {
		return nil, err
	}
	if !t.AllowsFact(in.Type) {
		// A stored change not applied here yet may declare it.
		if s.modelBehind != nil && s.modelBehind() {
			return nil, modelUpdating(fmt.Sprintf("Fact type %s is not declared for entity type %s here yet", in.Type, t.Name))
		}
		return nil, problem.Validation([]problem.FieldError{{Field: "type", Code: problem.CodeEnum,
			Message: fmt.Sprintf("fact type %s is not declared by entity type %s", in.Type, t.Name)}})
	}
	if in.Data == nil {
		in.Data = map[string]any{}
	}
	// The schema is checked before the ledger is called, so a client sees
	// every field error at once and nothing is decided on bad data.
	if errs := validateFactData(t.FactSchema(in.Type), in.Data, "data."); len(errs) > 0 {
		return nil, problem.Validation(errs)
	}
	input := mustJSON(ledger.AppendInput{Type: in.Type, Subtype: in.Subtype, Timestamp: in.Timestamp, Data: docJSON(in.Data)})
	facts, _, err := s.execute(ctx, tenant, e, mark, ledger.Command{Name: ledger.CommandAppend, Input: input}, Provenance{SourceID: in.SourceID, TraceID: in.TraceID, FactID: in.ID}, in.ExpectedVersion)
	if err != nil {
		return nil, err
	}
	if len(facts) != 1 {
		return nil, storeErr("append fact", fmt.Errorf("ledger %s recorded %d facts for one append", t.Ledger, len(facts)))
	}
	return &facts[0], nil
}

// Provenance is copied onto every fact a command records.
type Provenance struct {
	SourceID string
	TraceID  string
	// FactID, when set, is the id of the first recorded fact.
	FactID string
}

// ErrDuplicateFact reports an append whose fact id is already recorded:
// the append happened before and nothing was written now.
var ErrDuplicateFact = errors.New("platform: fact already recorded")

// Execute runs a command through the entity's ledger and records the facts
// it decides, with their folded state, in one group commit. With a
// state-dependent ledger the decision is pinned to the entity version it
// was made on and retried when another writer got there first.
// expectedVersion, when non-zero, is the caller's own pin and is never
// retried.
//
// Without a caller's pin the retries have no count limit, only ctx: a
// caller that did not ask for optimistic concurrency must never see a
// conflict, and a fixed number of attempts is what a busy entity written
// by several processes exhausts. Every lost race means another writer
// committed, so the entity as a whole always makes progress.
func (s *Service) Execute(ctx context.Context, tenant string, e *store.Entity, cmd ledger.Command, prov Provenance, expectedVersion int64) ([]store.Fact, json.RawMessage, error) {
	return s.execute(ctx, tenant, e, readMark{}, cmd, prov, expectedVersion)
}

// loadForWrite reads an entity a writer will decide on, with the mark that
// tells execute, once it holds the entity's lock, whether the copy is still
// current: most writes then read the entity once, not twice.
func (s *Service) loadForWrite(ctx context.Context, tenant, entityID string) (*store.Entity, readMark, error) {
	mark := s.locks.mark(tenant, entityID)
	e, err := s.loadEntity(ctx, tenant, entityID)
	return e, mark, err
}

// execute is Execute on a copy of e read after mark was taken (the zero
// mark: a copy of unknown age).
func (s *Service) execute(ctx context.Context, tenant string, e *store.Entity, mark readMark, cmd ledger.Command, prov Provenance, expectedVersion int64) ([]store.Fact, json.RawMessage, error) {
	t, err := s.storedType(e)
	if err != nil {
		return nil, nil, err
	}
	l := s.ledgerFor(t)
	cmd.TenantID, cmd.EntityID, cmd.EntityType = tenant, e.ID, e.Type
	if l.StateDependent() {
		// Writers to one entity in this process take turns, so they never
		// race each other's optimistic pins; other processes sharing the
		// database are still caught by the version check and retried.
		unlock := s.locks.lock(tenant, e.ID)
		defer unlock()
		if expectedVersion == 0 && !mark.current() {
			// The caller's copy may predate a writer that held the lock.
			if e, err = s.loadEntity(ctx, tenant, e.ID); err != nil {
				return nil, nil, err
			}
		}
	}
	for {
		if expectedVersion != 0 && e.Version != expectedVersion {
			return nil, nil, versionConflict(e.ID, e.Version, expectedVersion)
		}
		cmd.Now = s.nowMS()
		cmd.EntityVersion = e.Version
		dec, err := l.Decide(ctx, e.State, cmd)
		if err != nil {
			return nil, nil, decideErr(err)
		}
		if len(dec.Facts) == 0 {
			return nil, dec.Result, nil
		}
		pin := expectedVersion
		if pin == 0 && l.StateDependent() {
			pin = e.Version
		}
		items, err := s.factItems(ctx, tenant, e, t, l, dec.Facts, prov, pin, cmd.Now)
		if err != nil {
			return nil, nil, err
		}
		actx, span := tracing.Child(ctx, "store.append_commit")
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("factline.facts", len(items)), attribute.String("factline.entity_id", e.ID))
		}
		results, err := s.appender.append(actx, items)
		if serr := err; span.IsRecording() {
			if serr == nil && len(results) > 0 {
				if serr = results[0].Err; serr == nil {
					span.SetAttributes(attribute.String("factline.fact_id", results[0].Fact.ID))
				}
			}
			endStore(span, serr)
		}
		s.changed(tenant, e.ID)
		if err != nil {
			return nil, nil, storeErr("append facts", err)
		}
		if ferr := results[0].Err; ferr != nil {
			switch {
			case errors.Is(ferr, store.ErrNotFound):
				return nil, nil, entityNotFound(e.ID)
			case errors.Is(ferr, store.ErrAlreadyExists) && prov.FactID != "":
				return nil, nil, fmt.Errorf("%w: %s", ErrDuplicateFact, prov.FactID)
			case errors.Is(ferr, store.ErrVersionConflict) && expectedVersion == 0:
				if err := ctx.Err(); err != nil {
					return nil, nil, storeErr("append fact", fmt.Errorf("entity %s kept changing: %w", e.ID, err))
				}
				if e, err = s.loadEntity(ctx, tenant, e.ID); err != nil {
					return nil, nil, err
				}
				continue
			case errors.Is(ferr, store.ErrVersionConflict):
				latest, lerr := s.store.GetEntity(ctx, tenant, e.ID)
				if lerr != nil {
					return nil, nil, problem.Newf(problem.Conflict, "Entity %s has changed", e.ID)
				}
				return nil, nil, versionConflict(e.ID, latest.Version, pin)
			default:
				return nil, nil, storeErr("append fact", ferr)
			}
		}
		facts := make([]store.Fact, 0, len(results))
		for _, r := range results {
			if r.Err != nil {
				// Later items are pinned to the versions the first one
				// produced, so they fail only with the first.
				return nil, nil, storeErr("append facts", fmt.Errorf("partial append: %w", r.Err))
			}
			facts = append(facts, r.Fact)
		}
		return facts, dec.Result, nil
	}
}

func (s *Service) factItems(ctx context.Context, tenant string, e *store.Entity, t *manifest.EntityType, l ledger.Ledger, decided []ledger.NewFact, prov Provenance, pin, now int64) ([]store.Append, error) {
	items := make([]store.Append, len(decided))
	state := e.State
	written := 0 // bytes of fact data, numbers written out
	for i, nf := range decided {
		if !t.AllowsFact(nf.Type) {
			// A stored change not applied here yet may declare it: the
			// ledger version that records it reached this process first.
			if s.modelBehind != nil && s.modelBehind() {
				return nil, modelUpdating(fmt.Sprintf("Fact type %s is not declared for entity type %s here yet", nf.Type, e.Type))
			}
			return nil, ledgerFault(l.Name(), fmt.Sprintf("decided fact type %q, which entity type %s does not declare (declare it in the domain manifest before installing a ledger version that records it)", nf.Type, e.Type))
		}
		if nf.Subtype != "" && (!factTypeRe.MatchString(nf.Subtype) || len(nf.Subtype) > MaxSubtypeLength) {
			return nil, ledgerFault(l.Name(), fmt.Sprintf("decided a %s fact with subtype %.80q, not a lowercase name of at most %d characters", nf.Type, nf.Subtype, MaxSubtypeLength))
		}
		if nf.Timestamp < 0 {
			return nil, ledgerFault(l.Name(), fmt.Sprintf("decided a %s fact with timestamp %d, before the epoch", nf.Type, nf.Timestamp))
		}
		if nf.Timestamp > MaxFactTime {
			return nil, ledgerFault(l.Name(), fmt.Sprintf("decided a %s fact with timestamp %d, after the year 9999", nf.Type, nf.Timestamp))
		}
		data := nf.Data
		if len(data) == 0 || string(data) == "null" {
			data = json.RawMessage(`{}`)
		} else if b := bytes.TrimLeft(data, " \t\r\n"); len(b) == 0 || b[0] != '{' {
			// The plugin's output was parsed as JSON: a first byte other
			// than { is a value other than an object.
			return nil, ledgerFault(l.Name(), fmt.Sprintf("decided a %s fact whose data is not a JSON object", nf.Type))
		}
		if err := checkDecidedFact(l.Name(), t.FactSchema(nf.Type), nf); err != nil {
			return nil, err
		}
		data = store.PlainNumbers(data)
		// What the plugin made must be storable: the store's refusal of
		// a NUL, invalid UTF-8, a duplicate member or a number out of
		// range would be a 400 naming fields the client never sent.
		if err := store.CheckJSON("data", data); err != nil {
			return nil, ledgerFault(l.Name(), fmt.Sprintf("decided a %s fact whose %v", nf.Type, err))
		}
		// Numbers written out can be 20 times their text (1e99): the
		// decision's data is bounded as stored, not only as the plugin's
		// output was.
		if written += len(data); written > MaxDecisionData {
			return nil, ledgerFault(l.Name(), fmt.Sprintf("decided facts whose data, numbers written out, exceeds %d bytes", MaxDecisionData))
		}
		ts := nf.Timestamp
		if ts == 0 {
			ts = now
		}
		fid, fresh := id.New(id.Fact), true
		if i == 0 && prov.FactID != "" {
			fid, fresh = prov.FactID, false
		}
		f := store.Fact{
			ID:        fid,
			TenantID:  tenant,
			EntityID:  e.ID,
			Type:      nf.Type,
			Subtype:   nf.Subtype,
			SourceID:  prov.SourceID,
			TraceID:   prov.TraceID,
			Timestamp: ts,
			Data:      data,
			CreatedAt: now,
		}
		items[i] = store.Append{Fact: f, FreshID: fresh}
		if pin != 0 {
			items[i].ExpectedVersion = pin + int64(i)
		}
		if l.StateDependent() {
			f.EntityType = e.Type
			f.Seq = e.Version + int64(i) // provisional; the ledger must not depend on it
			next, err := l.Evolve(ctx, state, mustJSON(NewFactView(&f)))
			if err != nil {
				return nil, evolveErr(l.Name(), err)
			}
			if err := store.CheckJSON("state", next); err != nil {
				return nil, ledgerFault(l.Name(), fmt.Sprintf("evolved a state whose %v", err))
			}
			state = next
		}
	}
	if l.StateDependent() {
		items[len(items)-1].State = state
	}
	return items, nil
}

// checkDecidedFact checks a fact a ledger decided against its type's
// schema. A fact that does not fit is refused like a ledger refusal (422
// unprocessable, listing every field error): the request was well formed,
// but what the ledger made of it cannot be recorded. Nothing is stored.
func checkDecidedFact(ledgerName string, schema *manifest.FactSchema, nf ledger.NewFact) error {
	if schema == nil {
		return nil
	}
	data := map[string]any{}
	if len(nf.Data) > 0 {
		var err error
		if data, err = DecodeObject(nf.Data); err != nil {
			return storeErr("decide", fmt.Errorf("ledger %s decided a %s fact whose data is not an object: %w", ledgerName, nf.Type, err))
		}
	}
	errs := validateFactData(schema, data, "data.")
	if len(errs) == 0 {
		return nil
	}
	return &problem.Error{Kind: problem.Unprocessable, Errors: errs,
		Detail: fmt.Sprintf("Ledger %s decided a %s fact that does not fit the schema of %s", ledgerName, nf.Type, nf.Type)}
}

// ledgerFault is a decision the host cannot record because the ledger
// broke the plugin contract (a fact type its entity type does not
// declare, data that is not an object, a timestamp before the epoch): a
// 500 naming the ledger, not the client's fault.
func ledgerFault(ledgerName, what string) error {
	msg := fmt.Sprintf("Ledger %s %s; nothing was recorded. Quote the trace_id when reporting it", ledgerName, what)
	return problem.Wrap(problem.Internal, msg, errors.New("ledger "+ledgerName+" "+what))
}

// evolveErr maps a ledger's evolve failure: its own problem (a plugin's
// deadline, naming it; a trap) as it is, and what would blame the
// client (a refusal, bad input) as the ledger's fault, since evolve is
// given a fact the ledger itself decided.
func evolveErr(ledgerName string, err error) error {
	var be *ledger.BusinessError
	var pe *problem.Error
	switch {
	case errors.As(err, &be):
		return ledgerFault(ledgerName, "refused to evolve the fact it decided: "+be.Message)
	case errors.As(err, &pe) && pe.Kind.Status < 500:
		return ledgerFault(ledgerName, "refused the fact it decided as evolve input: "+pe.Error())
	case errors.As(err, &pe):
		return pe
	}
	return storeErr("evolve", err)
}

func decideErr(err error) error {
	var be *ledger.BusinessError
	if errors.As(err, &be) {
		return &problem.Error{Kind: problem.Unprocessable, Detail: be.Message, Errors: []problem.FieldError{{Field: "command", Code: be.Code, Message: be.Message}}, Err: err}
	}
	if errors.Is(err, ledger.ErrUnknownCommand) {
		return problem.Wrap(problem.BadRequest, "The entity's ledger does not serve this command", err)
	}
	var pe *problem.Error
	if errors.As(err, &pe) {
		return pe
	}
	return storeErr("decide", err)
}

// GetFact returns a fact of the tenant.
func (s *Service) GetFact(ctx context.Context, tenant, factID string) (*store.Fact, error) {
	ctx, span := tracing.Child(ctx, "store.get_fact")
	f, err := s.store.GetFact(ctx, tenant, factID)
	endStore(span, err)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem.Newf(problem.NotFound, "Fact %s not found", shownID(factID))
	}
	if err != nil {
		return nil, storeErr("get fact", err)
	}
	return f, nil
}

// FactPage is one page of an entity's ledger.
type FactPage struct {
	Items   []store.Fact
	Cursor  string
	HasMore bool
}

// ListEntityFacts pages through an entity's facts in seq order.
func (s *Service) ListEntityFacts(ctx context.Context, tenant, entityID, cursor string, limit int) (*FactPage, error) {
	limit, err := PageLimit(limit)
	if err != nil {
		return nil, err
	}
	after, err := DecodeCursor(ListingEntityFacts(entityID), cursor)
	if err != nil {
		return nil, err
	}
	var afterSeq int64
	if after != "" {
		if _, err := fmt.Sscanf(after, "%d", &afterSeq); err != nil || afterSeq < 0 {
			return nil, problem.Validation([]problem.FieldError{{Field: "cursor", Code: problem.CodeFormat, Message: "cursor is not one this API returned"}})
		}
	}
	if _, err := s.loadEntity(ctx, tenant, entityID); err != nil {
		return nil, err
	}
	rows, err := s.store.ListEntityFacts(ctx, tenant, entityID, afterSeq, limit+1)
	if err != nil {
		return nil, storeErr("list facts", err)
	}
	page := &FactPage{Items: rows}
	if len(rows) > limit {
		page.Items, page.HasMore = rows[:limit], true
		page.Cursor = EncodeCursor(ListingEntityFacts(entityID), fmt.Sprint(rows[limit-1].Seq))
	}
	return page, nil
}

// ListFactsInput selects a tenant's facts for GET /v1/facts. Empty fields
// leave that filter open.
type ListFactsInput struct {
	Type     string
	Subtype  string // only with Type
	SourceID string
	EntityID string
	// From and To bound the facts' timestamp, inclusive: milliseconds
	// since the epoch or RFC 3339.
	From, To string
	Cursor   string
	Limit    int
}

// ListFacts pages through the tenant's facts that in selects, in commit
// (global position) order. The cursor is the last position returned, so a
// page never skips or repeats a fact, whatever is appended meanwhile.
func (s *Service) ListFacts(ctx context.Context, tenant string, in ListFactsInput) (*FactPage, error) {
	var errs []problem.FieldError
	limit, err := PageLimit(in.Limit)
	if err != nil {
		return nil, err
	}
	after, err := DecodeCursor(ListingFacts, in.Cursor)
	if err != nil {
		return nil, err
	}
	f := store.FactFilter{TenantID: tenant, Type: in.Type, Subtype: in.Subtype, SourceID: in.SourceID, EntityID: in.EntityID, Limit: limit + 1}
	if after != "" {
		if _, err := fmt.Sscanf(after, "%d", &f.AfterPosition); err != nil || f.AfterPosition < 1 || fmt.Sprint(f.AfterPosition) != after {
			return nil, problem.Validation([]problem.FieldError{{Field: "cursor", Code: problem.CodeFormat, Message: "cursor is not one this API returned"}})
		}
	}
	if in.Subtype != "" && in.Type == "" {
		// Subtypes are named within their type; the index serving them
		// starts with the type.
		errs = append(errs, problem.FieldError{Field: "subtype", Code: problem.CodeRequired, Message: "subtype filters need a type filter"})
	}
	var ferr, terr error
	if f.From, ferr = parseFactTime(in.From); ferr != nil {
		errs = append(errs, problem.FieldError{Field: "from", Code: problem.CodeFormat, Message: "from " + ferr.Error()})
	}
	if f.To, terr = parseFactTime(in.To); terr != nil {
		errs = append(errs, problem.FieldError{Field: "to", Code: problem.CodeFormat, Message: "to " + terr.Error()})
	}
	if ferr == nil && terr == nil && f.From != 0 && f.To != 0 && f.From > f.To {
		errs = append(errs, problem.FieldError{Field: "to", Code: problem.CodeRange, Message: "to must not be before from"})
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs)
	}
	lctx, span := tracing.Child(ctx, "store.list_facts")
	rows, err := s.store.ListFacts(lctx, f)
	endStore(span, err)
	if err != nil {
		return nil, storeErr("list facts", err)
	}
	page := &FactPage{Items: rows}
	if len(rows) > limit {
		page.Items, page.HasMore = rows[:limit], true
		page.Cursor = EncodeCursor(ListingFacts, fmt.Sprint(rows[limit-1].Position))
	}
	return page, nil
}

// parseFactTime reads a timestamp filter: milliseconds since the epoch or
// RFC 3339; "" is 0 (open).
func parseFactTime(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 1 {
			return 0, errors.New("must be a positive number of milliseconds")
		}
		return ms, nil
	}
	t, err := ParseRFC3339(v)
	if err != nil || t.UnixMilli() < 1 {
		return 0, errors.New("must be milliseconds since the epoch or an RFC 3339 time")
	}
	return t.UnixMilli(), nil
}

// endStore ends a store call's span; a row not found is an answer, not a
// failure of the call.
func endStore(span trace.Span, err error) {
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	tracing.End(span, err)
}

// shapeOf returns how deep v nests below depth (a map or slice is one
// level more) and adds the members of every map in it to keys.
func shapeOf(v any, depth int, keys *int) int {
	deepest := depth
	switch x := v.(type) {
	case map[string]any:
		*keys += len(x)
		deepest = depth + 1
		for _, e := range x {
			deepest = max(deepest, shapeOf(e, depth+1, keys))
		}
	case []any:
		deepest = depth + 1
		for _, e := range x {
			deepest = max(deepest, shapeOf(e, depth+1, keys))
		}
	}
	return deepest
}
