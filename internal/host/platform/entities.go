package platform

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/tracing"
)

// Page size bounds of every listing.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// clientIDRe bounds ids chosen by clients: printable, URL-safe, short.
var clientIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$`)

// CreateEntityInput is a new entity.
type CreateEntityInput struct {
	Type string
	// ID is optional; a fresh ent_<ulid> is generated when empty.
	ID       string
	Fields   map[string]any
	Metadata map[string]any
}

// CreateEntity validates and stores a new entity at version 1.
func (s *Service) CreateEntity(ctx context.Context, tenant string, in CreateEntityInput) (*store.Entity, error) {
	if in.Fields == nil {
		in.Fields = map[string]any{}
	}
	errs, err := s.EntityInputErrors(in)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs)
	}
	t, err := s.entityType(in.Type)
	if err != nil {
		return nil, err
	}
	if in.ID == "" {
		in.ID = id.New(id.Entity)
	}
	now := s.nowMS()
	e := &store.Entity{
		TenantID:  tenant,
		ID:        in.ID,
		Type:      t.Name,
		Version:   1,
		Data:      docJSON(in.Fields),
		Slots:     t.Slots(in.Fields),
		CreatedAt: now,
		UpdatedAt: now,
	}
	if in.Metadata != nil {
		e.Metadata = docJSON(in.Metadata)
	}
	err = s.store.CreateEntity(ctx, e)
	s.changed(tenant, e.ID)
	if err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			return nil, problem.Newf(problem.Conflict, "Entity %s already exists", in.ID)
		}
		return nil, storeErr("create entity", err)
	}
	return e, nil
}

// EntityInputErrors returns every field error CreateEntity would report
// for in, without writing: a missing type, a malformed id, and the declared
// fields' rules. An unknown entity type is the error (a bad request).
func (s *Service) EntityInputErrors(in CreateEntityInput) ([]problem.FieldError, error) {
	if in.Type == "" {
		return []problem.FieldError{{Field: "type", Code: problem.CodeRequired, Message: "type is required"}}, nil
	}
	t, err := s.entityType(in.Type)
	if err != nil {
		return nil, err
	}
	var errs []problem.FieldError
	if in.ID != "" && !clientIDRe.MatchString(in.ID) {
		errs = append(errs, problem.FieldError{Field: "id", Code: problem.CodeFormat, Message: "id must be 1-128 characters of letters, digits and _ . : - starting with a letter or digit"})
	}
	return append(errs, validateFields(t, in.Fields, "", false, nil)...), nil
}

// Read says whether an entity read may be served from the entity cache.
type Read int

const (
	// Cached reads through the entity cache when there is one: the entity
	// may then be up to a change notification old when another process
	// changed it (this process's own writes are seen at once).
	Cached Read = iota
	// Fresh reads the store: everything committed before the read began
	// is seen, whichever process wrote it.
	Fresh
)

// GetEntity returns an entity of the given type in the tenant. The type is
// required by the contract (`entity_type required`).
//
// With Cached, its byte slices and slot pointers may be shared: do not
// modify what they point to. Writers read with LoadEntity instead.
func (s *Service) GetEntity(ctx context.Context, tenant, entityID, entityType string, read Read) (*store.Entity, error) {
	if entityType == "" {
		return nil, problem.New(problem.BadRequest, "entity_type required")
	}
	if _, err := s.entityType(entityType); err != nil {
		return nil, err
	}
	var (
		e   *store.Entity
		err error
	)
	if s.cache != nil && read == Cached {
		e, err = s.cache.Get(ctx, tenant, entityID, func(ctx context.Context) (*store.Entity, error) {
			ctx, span := tracing.Child(ctx, "store.get_entity")
			e, err := s.store.GetEntity(ctx, tenant, entityID)
			endStore(span, err)
			return e, err
		})
		err = loadErr(entityID, err)
	} else {
		e, err = s.loadEntity(ctx, tenant, entityID)
	}
	if err != nil {
		return nil, err
	}
	if e.Type != entityType {
		return nil, entityNotFound(entityID)
	}
	return e, nil
}

// LoadEntity returns an entity of the tenant whatever its type.
func (s *Service) LoadEntity(ctx context.Context, tenant, entityID string) (*store.Entity, error) {
	return s.loadEntity(ctx, tenant, entityID)
}

func (s *Service) loadEntity(ctx context.Context, tenant, entityID string) (*store.Entity, error) {
	ctx, span := tracing.Child(ctx, "store.get_entity")
	e, err := s.store.GetEntity(ctx, tenant, entityID)
	endStore(span, err)
	if err != nil {
		return nil, loadErr(entityID, err)
	}
	return e, nil
}

// loadErr maps an error of store.GetEntity.
func loadErr(entityID string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return entityNotFound(entityID)
	}
	return storeErr("get entity", err)
}

// UpdateEntityInput is a JSON merge patch of an entity's fields, applied
// only when the entity is still at ExpectedVersion.
type UpdateEntityInput struct {
	ID string
	// Type, when set, must match the stored type.
	Type            string
	ExpectedVersion int64
	// Patch is a JSON merge patch (RFC 7396) of the fields: a member set
	// to null removes the field, an object merges into the stored object
	// member by member, anything else replaces it.
	Patch map[string]any
	// Metadata is a merge patch of the stored metadata, the same way;
	// ClearMetadata (metadata: null) removes it all.
	Metadata      map[string]any
	ClearMetadata bool
}

// UpdateEntity applies a patch with optimistic concurrency: a stale
// ExpectedVersion is a conflict and nothing is written.
func (s *Service) UpdateEntity(ctx context.Context, tenant string, in UpdateEntityInput) (*store.Entity, error) {
	if in.ExpectedVersion <= 0 {
		return nil, problem.Validation([]problem.FieldError{{Field: "version", Code: problem.CodeRequired, Message: "version (the entity version the change is based on) is required and positive"}})
	}
	if in.Type != "" {
		if _, err := s.entityType(in.Type); err != nil {
			return nil, err
		}
	}
	cur, err := s.loadEntity(ctx, tenant, in.ID)
	if err != nil {
		return nil, err
	}
	if in.Type != "" && cur.Type != in.Type {
		return nil, entityNotFound(in.ID)
	}
	if cur.Version != in.ExpectedVersion {
		return nil, versionConflict(in.ID, cur.Version, in.ExpectedVersion)
	}
	t, err := s.storedType(cur)
	if err != nil {
		return nil, err
	}
	fields, err := DecodeObject(cur.Data)
	if err != nil {
		return nil, storeErr("decode stored entity", err)
	}
	mergePatch(fields, in.Patch)
	if errs := validateFields(t, fields, "", false, orEmpty(in.Patch)); len(errs) > 0 {
		return nil, problem.Validation(errs)
	}
	u := store.EntityUpdate{
		TenantID:        tenant,
		ID:              in.ID,
		ExpectedVersion: in.ExpectedVersion,
		Data:            docJSON(fields),
		Slots:           t.Slots(fields),
		UpdatedAt:       s.nowMS(),
	}
	switch {
	case in.ClearMetadata:
		u.Metadata = json.RawMessage(`{}`)
	case in.Metadata != nil:
		meta := map[string]any{}
		if len(cur.Metadata) > 0 && string(cur.Metadata) != "null" {
			if meta, err = DecodeObject(cur.Metadata); err != nil {
				return nil, storeErr("decode stored metadata", err)
			}
		}
		mergePatch(meta, in.Metadata)
		u.Metadata = docJSON(meta)
	}
	e, err := s.store.UpdateEntity(ctx, u)
	s.changed(tenant, in.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, entityNotFound(in.ID)
	case errors.Is(err, store.ErrVersionConflict):
		latest, lerr := s.store.GetEntity(ctx, tenant, in.ID)
		if lerr != nil {
			return nil, problem.Newf(problem.Conflict, "Entity %s has changed since version %d", in.ID, in.ExpectedVersion)
		}
		return nil, versionConflict(in.ID, latest.Version, in.ExpectedVersion)
	case err != nil:
		return nil, storeErr("update entity", err)
	}
	return e, nil
}

// mergePatch applies an RFC 7396 merge patch to target, in place.
func mergePatch(target, patch map[string]any) {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(target, k)
		case map[string]any:
			t, ok := target[k].(map[string]any)
			if !ok {
				t = map[string]any{}
			}
			mergePatch(t, pv)
			target[k] = t
		default:
			target[k] = v
		}
	}
}

func versionConflict(entityID string, current, expected int64) error {
	return problem.Newf(problem.Conflict, "Entity %s is at version %d, not %d", entityID, current, expected)
}

// ListEntitiesInput selects entities of one type.
type ListEntitiesInput struct {
	Type string
	// Filters maps indexed field names to the value they must equal.
	Filters map[string]string
	Cursor  string
	Limit   int
}

// EntityPage is one page of a listing.
type EntityPage struct {
	Items   []store.Entity
	Cursor  string // empty when there is no next page
	HasMore bool
}

// ListEntities lists entities of a type in id order with keyset
// pagination: pages never repeat or skip a row, even while rows are added.
func (s *Service) ListEntities(ctx context.Context, tenant string, in ListEntitiesInput) (*EntityPage, error) {
	if in.Type == "" {
		return nil, problem.New(problem.BadRequest, "entity_type required")
	}
	t, err := s.entityType(in.Type)
	if err != nil {
		return nil, err
	}
	limit, err := PageLimit(in.Limit)
	if err != nil {
		return nil, err
	}
	after, err := DecodeCursor(ListingEntities, in.Cursor)
	if err != nil {
		return nil, err
	}
	f := store.EntityFilter{TenantID: tenant, Type: t.Name, AfterID: after, Limit: limit + 1}
	var errs []problem.FieldError
	for name, raw := range in.Filters {
		fd, ok := t.Field(name)
		if !ok || fd.Storage == "" {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeUnknownField, Message: fmt.Sprintf("%s is not an indexed field of %s", name, t.Name)})
			continue
		}
		_, number, _ := store.ParseSlotColumn(fd.Storage)
		if !number {
			f.Where = append(f.Where, store.SlotFilter{Slot: fd.Storage, Value: raw})
			continue
		}
		n, perr := strconv.ParseFloat(raw, 64)
		if perr != nil {
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeType, Message: fmt.Sprintf("%s must be a number", name)})
			continue
		}
		if indexed, exact := indexedExactly(raw); !exact {
			// It would match the values that share its double.
			errs = append(errs, problem.FieldError{Field: name, Code: problem.CodeRange, Message: notIndexable(name, raw, indexed)})
			continue
		}
		f.Where = append(f.Where, store.SlotFilter{Slot: fd.Storage, Value: n})
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs)
	}
	lctx, span := tracing.Child(ctx, "store.list_entities")
	rows, err := s.store.ListEntities(lctx, f)
	endStore(span, err)
	if err != nil {
		return nil, storeErr("list entities", err)
	}
	page := &EntityPage{Items: rows}
	if len(rows) > limit {
		page.Items, page.HasMore = rows[:limit], true
		page.Cursor = EncodeCursor(ListingEntities, rows[limit-1].ID)
	}
	return page, nil
}

// PageLimit applies the default page size and rejects sizes beyond the
// maximum.
func PageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageSize, nil
	case limit < 0 || limit > MaxPageSize:
		return 0, problem.Validation([]problem.FieldError{{Field: "limit", Code: problem.CodeRange, Message: fmt.Sprintf("limit must be between 1 and %d", MaxPageSize)}})
	}
	return limit, nil
}

// Listing names the listing a cursor pages through, so that a cursor
// given to another listing (another endpoint, or another entity's facts)
// is refused rather than read as a position there: an entity id is no
// position in the fact stream, and one entity's seq is another's shifted
// page.
type Listing string

// The listings with cursors.
const (
	ListingEntities   Listing = "e"
	ListingFacts      Listing = "f"
	ListingConfigs    Listing = "c"
	ListingDeliveries Listing = "d"
	ListingDeadLetter Listing = "l"
)

// ListingEntityFacts is the listing of one entity's facts.
func ListingEntityFacts(entityID string) Listing {
	h := fnv.New32a()
	h.Write([]byte(entityID))
	return Listing(fmt.Sprintf("s%08x", h.Sum32()))
}

// EncodeCursor makes an opaque cursor of listing from a keyset position.
func EncodeCursor(listing Listing, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(listing) + ":" + key))
}

// DecodeCursor reverses EncodeCursor for listing; an empty cursor is the
// start.
func DecodeCursor(listing Listing, c string) (string, error) {
	if c == "" {
		return "", nil
	}
	// Strict, and only the URL-safe alphabet (the decoder would skip
	// newlines): one cursor has one spelling.
	if strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return "", problem.Validation([]problem.FieldError{{Field: "cursor", Code: problem.CodeFormat, Message: "cursor is not one this API returned"}})
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	prefix := string(listing) + ":"
	if err != nil || len(b) <= len(prefix) || !strings.HasPrefix(string(b), prefix) {
		return "", problem.Validation([]problem.FieldError{{Field: "cursor", Code: problem.CodeFormat, Message: "cursor is not one this listing returned"}})
	}
	return string(b[len(prefix):]), nil
}

// orEmpty is m, or an empty map for nil: a patch that sets no field.
func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
