package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/factline/factline/internal/host/store"
)

// slotColumns lists ix_s_1..ix_s_10 then ix_n_1..ix_n_5.
var slotColumns = func() []string {
	cols := make([]string, 0, store.StringSlots+store.NumberSlots)
	for i := range store.StringSlots {
		cols = append(cols, store.SlotColumn(i, false))
	}
	for i := range store.NumberSlots {
		cols = append(cols, store.SlotColumn(i, true))
	}
	return cols
}()

var (
	entityColumns = "tenant_id, id, type, version, data, metadata, state, " +
		strings.Join(slotColumns, ", ") + ", created_at, updated_at"

	// insertEntity has the values $1..$22 in entityColumns order, with the
	// JSON ones sent as text.
	insertEntity = func() string {
		vals := []string{"$1", "$2", "$3", "$4", "$5::jsonb", "$6::jsonb", "$7::jsonb"}
		for i := range slotColumns {
			vals = append(vals, "$"+strconv.Itoa(8+i))
		}
		n := 8 + len(slotColumns)
		vals = append(vals, "$"+strconv.Itoa(n), "$"+strconv.Itoa(n+1))
		return `INSERT INTO entities (` + entityColumns + `) VALUES (` + strings.Join(vals, ", ") + `)`
	}()

	// updateEntity sets data ($1), metadata unless $2 is NULL, the slots
	// ($3..$17) and updated_at ($18) when tenant ($19), id ($20) and version
	// ($21) match, and announces the change when it does.
	updateEntity = func() string {
		var set strings.Builder
		for i, c := range slotColumns {
			fmt.Fprintf(&set, "%s = $%d, ", c, 3+i)
		}
		n := 3 + len(slotColumns)
		return fmt.Sprintf(`WITH u AS (UPDATE entities
SET data = $1::jsonb, metadata = COALESCE($2::jsonb, metadata), %sversion = version + 1, updated_at = $%d
WHERE tenant_id = $%d AND id = $%d AND version = $%d
RETURNING `+entityColumns+`), n AS (`+notifyEntity+`)
SELECT `+entityColumns+` FROM u, n`, set.String(), n, n+1, n+2, n+3)
	}()

	// setEntityState sets the state ($1) of the entity with tenant $2 and
	// id $3, announces the change and counts the rows changed.
	setEntityState = `WITH u AS (UPDATE entities SET state = $1::jsonb WHERE tenant_id = $2 AND id = $3
RETURNING tenant_id, id), n AS (` + notifyEntity + `)
SELECT count(*) FROM n`
)

// entityChannel is the LISTEN/NOTIFY channel that announces entity changes
// (UpdateEntity, SetEntityState, and the entities of AppendFacts, which
// also announces its head on notifyChannel) to entity watches. The payload
// is the JSON array [tenant_id, id].
const entityChannel = "factline_entities"

// notifyEntity announces every row of u (tenant_id, id) on entityChannel;
// PostgreSQL delivers the notifications at commit. The statement using it
// must read n, or it does not run.
const notifyEntity = `SELECT pg_notify('` + entityChannel + `', json_build_array(u.tenant_id, u.id)::text) FROM u`

// parseEntityPayload reads an entityChannel payload.
func parseEntityPayload(payload string) (tenantID, id string, err error) {
	var key []string
	if err := json.Unmarshal([]byte(payload), &key); err != nil {
		return "", "", err
	}
	if len(key) != 2 || key[0] == "" || key[1] == "" {
		return "", "", fmt.Errorf("want [tenant_id, id], got %d values", len(key))
	}
	return key[0], key[1], nil
}

// slotArgs returns the slot values in slotColumns order; nil pointers are
// sent as NULL.
func slotArgs(sl store.Slots) []any {
	args := make([]any, 0, len(slotColumns))
	for _, p := range sl.S {
		args = append(args, p)
	}
	for _, p := range sl.N {
		args = append(args, p)
	}
	return args
}

// scanEntity reads the current row of rows, a row of entityColumns. Slots
// get fresh pointers, so callers may change them freely.
//
// Every entity read goes through here, so the row is decoded from the
// wire values directly when the columns have the types the schema gives
// them (text, bigint, jsonb, double precision) rather than through pgx's
// per-column scan plans; anything else is scanned the general way.
func scanEntity(rows pgx.Rows) (*store.Entity, error) {
	fds := rows.FieldDescriptions()
	if !entityWireTypes(fds) {
		return scanEntityGeneric(rows)
	}
	vals := rows.RawValues()
	var (
		e   store.Entity
		err error
	)
	text := func(i int) string {
		if vals[i] == nil && err == nil {
			err = fmt.Errorf("column %s is NULL", fds[i].Name)
		}
		return string(vals[i])
	}
	e.TenantID, e.ID, e.Type = text(0), text(1), text(2)
	e.Version, err = wireInt8(vals[3], fds[3].Format, err)
	var data, metadata, state []byte
	data, err = wireJSONB(vals[4], fds[4].Format, err)
	metadata, err = wireJSONB(vals[5], fds[5].Format, err)
	state, err = wireJSONB(vals[6], fds[6].Format, err)
	col := 7
	for i := range e.Slots.S {
		if v := vals[col]; v != nil {
			s := string(v)
			e.Slots.S[i] = &s
		}
		col++
	}
	for i := range e.Slots.N {
		if v := vals[col]; v != nil {
			var f float64
			f, err = wireFloat8(v, fds[col].Format, err)
			e.Slots.N[i] = &f
		}
		col++
	}
	e.CreatedAt, err = wireInt8(vals[col], fds[col].Format, err)
	e.UpdatedAt, err = wireInt8(vals[col+1], fds[col+1].Format, err)
	if err != nil {
		return nil, fmt.Errorf("decode entity row: %w", err)
	}
	if data == nil {
		return nil, errors.New("decode entity row: column data is NULL")
	}
	e.Data = json.RawMessage(data)
	e.Metadata = jsonOrNil(metadata)
	e.State = jsonOrNil(state)
	return &e, nil
}

// entityColumnOIDs are the types of entityColumns in the schema.
var entityColumnOIDs = func() []uint32 {
	oids := []uint32{pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int8OID, pgtype.JSONBOID, pgtype.JSONBOID, pgtype.JSONBOID}
	for range store.StringSlots {
		oids = append(oids, pgtype.TextOID)
	}
	for range store.NumberSlots {
		oids = append(oids, pgtype.Float8OID)
	}
	return append(oids, pgtype.Int8OID, pgtype.Int8OID)
}()

// entityWireTypes reports whether the row's columns are entityColumns with
// the schema's types, in a format scanEntity decodes.
func entityWireTypes(fds []pgconn.FieldDescription) bool {
	if len(fds) != len(entityColumnOIDs) {
		return false
	}
	for i, fd := range fds {
		if fd.DataTypeOID != entityColumnOIDs[i] || (fd.Format != pgx.TextFormatCode && fd.Format != pgx.BinaryFormatCode) {
			return false
		}
	}
	return true
}

// wireInt8 decodes a NOT NULL bigint; err, when set, is passed on.
func wireInt8(v []byte, format int16, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	switch {
	case v == nil:
		return 0, errors.New("bigint column is NULL")
	case format == pgx.TextFormatCode:
		return strconv.ParseInt(string(v), 10, 64)
	case len(v) != 8:
		return 0, fmt.Errorf("bigint of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// wireFloat8 decodes a double precision value; err, when set, is passed
// on.
func wireFloat8(v []byte, format int16, err error) (float64, error) {
	if err != nil {
		return 0, err
	}
	if format == pgx.TextFormatCode {
		return strconv.ParseFloat(string(v), 64)
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("double precision of %d bytes", len(v))
	}
	return math.Float64frombits(binary.BigEndian.Uint64(v)), nil
}

// wireJSONB copies a jsonb value's JSON text (nil for NULL); err, when
// set, is passed on. The binary format is a version byte, 1, then the
// text.
func wireJSONB(v []byte, format int16, err error) ([]byte, error) {
	if err != nil || v == nil {
		return nil, err
	}
	if format == pgx.BinaryFormatCode {
		if len(v) == 0 || v[0] != 1 {
			return nil, errors.New("jsonb value of an unknown binary version")
		}
		v = v[1:]
	}
	return bytes.Clone(v), nil
}

// scanEntityGeneric reads a row of entityColumns through pgx's scan plans.
func scanEntityGeneric(row pgx.Row) (*store.Entity, error) {
	var (
		e                     store.Entity
		data, metadata, state []byte
	)
	dest := []any{&e.TenantID, &e.ID, &e.Type, &e.Version, &data, &metadata, &state}
	for i := range e.Slots.S {
		dest = append(dest, &e.Slots.S[i])
	}
	for i := range e.Slots.N {
		dest = append(dest, &e.Slots.N[i])
	}
	dest = append(dest, &e.CreatedAt, &e.UpdatedAt)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	e.Data = json.RawMessage(data)
	e.Metadata = jsonOrNil(metadata)
	e.State = jsonOrNil(state)
	return &e, nil
}

// queryEntity runs a query of one entity row; pgx.ErrNoRows when there is
// none.
func (s *Store) queryEntity(ctx context.Context, q string, args ...any) (*store.Entity, error) {
	return queryEntity(ctx, s.pool, q, args...)
}

// queryEntity is Store.queryEntity on pool p.
func queryEntity(ctx context.Context, p db, q string, args ...any) (*store.Entity, error) {
	rows, err := p.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, pgx.ErrNoRows
	}
	e, err := scanEntity(rows)
	if err != nil {
		return nil, err
	}
	rows.Close()
	return e, rows.Err()
}

// CreateEntity inserts e with version 1.
func (s *Store) CreateEntity(ctx context.Context, e *store.Entity) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("postgres: create entity: %w", err)
	}
	args := []any{e.TenantID, e.ID, e.Type, int64(1), objectOrEmpty(e.Data), nullJSON(e.Metadata), nullJSON(e.State)}
	args = append(args, slotArgs(e.Slots)...)
	args = append(args, e.CreatedAt, e.UpdatedAt)
	if _, err := s.pool.Exec(ctx, insertEntity, args...); err != nil {
		return fmt.Errorf("postgres: create entity %s: %w", e.ID, inDoubt(interpretError(err)))
	}
	e.Version = 1
	return nil
}

// GetEntity returns one entity of the tenant. Calls made at the same time
// may share a statement (entityread.go).
func (s *Store) GetEntity(ctx context.Context, tenantID, id string) (*store.Entity, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("postgres: get entity: %w", err)
	}
	e, err := s.reads.get(ctx, tenantID, id)
	if err != nil {
		return nil, fmt.Errorf("postgres: get entity %s: %w", id, interpretError(err))
	}
	return e, nil
}

// getEntity reads one entity by its primary key, on the read pool.
func (s *Store) getEntity(ctx context.Context, tenantID, id string) (*store.Entity, error) {
	return queryEntity(ctx, s.rpool, getEntity, tenantID, id)
}

// UpdateEntity replaces data, metadata (unless nil) and slots when the
// version still matches. One statement: the row lock it takes makes the
// version check and the increment atomic.
func (s *Store) UpdateEntity(ctx context.Context, u store.EntityUpdate) (*store.Entity, error) {
	if err := u.Check(); err != nil {
		return nil, fmt.Errorf("postgres: update entity: %w", err)
	}
	args := []any{objectOrEmpty(u.Data), nullJSON(u.Metadata)}
	args = append(args, slotArgs(u.Slots)...)
	args = append(args, u.UpdatedAt, u.TenantID, u.ID, u.ExpectedVersion)
	e, err := s.queryEntity(ctx, updateEntity, args...)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.entityMissOrConflict(ctx, u.TenantID, u.ID)
	} else {
		err = inDoubt(err)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: update entity %s: %w", u.ID, interpretError(err))
	}
	return e, nil
}

// entityMissOrConflict tells why a versioned update matched no row. Entities
// are never deleted, so a row that exists now existed then.
func (s *Store) entityMissOrConflict(ctx context.Context, tenantID, id string) error {
	var exists bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM entities WHERE tenant_id = $1 AND id = $2)`,
		tenantID, id).Scan(&exists)
	switch {
	case err != nil:
		return err
	case !exists:
		return store.ErrNotFound
	default:
		return store.ErrVersionConflict
	}
}

// ListEntities lists entities of one type ordered by id, after f.AfterID.
func (s *Store) ListEntities(ctx context.Context, f store.EntityFilter) ([]store.Entity, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("postgres: list entities: %w", err)
	}
	var q strings.Builder
	q.WriteString(`SELECT ` + entityColumns + ` FROM entities WHERE tenant_id = $1 AND type = $2`)
	args := []any{f.TenantID, f.Type}
	for _, w := range f.Where {
		col, v, err := w.Column()
		if err != nil {
			return nil, fmt.Errorf("postgres: list entities: %w", err)
		}
		args = append(args, v)
		fmt.Fprintf(&q, ` AND %s = $%d`, col, len(args))
	}
	if f.AfterID != "" {
		args = append(args, f.AfterID)
		fmt.Fprintf(&q, ` AND id > $%d`, len(args))
	}
	args = append(args, limitArg(f.Limit))
	fmt.Fprintf(&q, ` ORDER BY id LIMIT $%d`, len(args))

	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list entities: %w", err)
	}
	defer rows.Close()
	var out []store.Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list entities: %w", err)
		}
		out = append(out, *e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list entities: %w", err)
	}
	return out, nil
}

// SetEntityState overwrites the State snapshot; the version is unchanged.
func (s *Store) SetEntityState(ctx context.Context, tenantID, id string, state json.RawMessage) error {
	if err := store.CheckJSON("state", state); err != nil {
		return fmt.Errorf("postgres: set entity state: %w", err)
	}
	var changed int64
	err := inDoubt(s.pool.QueryRow(ctx, setEntityState, nullJSON(state), tenantID, id).Scan(&changed))
	if err == nil && changed == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: set entity state %s: %w", id, interpretError(err))
	}
	return nil
}
