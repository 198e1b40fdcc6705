package postgres

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
)

// TestScanEntityWire: the wire decoder of entity rows reads every kind of
// value exactly as pgx's scan plans do, in the binary format the store's
// queries get and in the text format of the simple protocol.
func TestScanEntityWire(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	str := func(v string) *string { return &v }
	num := func(v float64) *float64 { return &v }
	full := store.Slots{}
	for i := range full.S {
		full.S[i] = str("slot é " + string(rune('a'+i)))
	}
	for i, v := range []float64{0, -1.5, math.MaxFloat64, math.SmallestNonzeroFloat64, 1e15 + 0.25} {
		full.N[i] = num(v)
	}
	entities := []*store.Entity{
		{TenantID: "t", ID: "plain", Type: "account", Data: json.RawMessage(`{}`), CreatedAt: 1, UpdatedAt: 2},
		{TenantID: "t", ID: "full", Type: "deal", Data: json.RawMessage(`{"name":"x","n":[1,2.50,{"k":null}],"u":"\u00e9\\n"}`),
			Metadata: json.RawMessage(`{"m":true}`), State: json.RawMessage(`{"balance":"10.25"}`), Slots: full,
			CreatedAt: math.MaxInt64, UpdatedAt: -5},
		{TenantID: "t", ID: "some", Type: "asset", Data: json.RawMessage(`{"a":1}`), State: json.RawMessage(`[]`),
			Slots: store.Slots{S: [store.StringSlots]*string{2: str("")}, N: [store.NumberSlots]*float64{4: num(math.Copysign(0, -1))}}},
	}
	for _, e := range entities {
		if err := s.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	q := `SELECT ` + entityColumns + ` FROM entities ORDER BY id`
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		read := func(scan func(pgx.Rows) (*store.Entity, error)) []*store.Entity {
			rows, err := s.pool.Query(ctx, q, mode)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			if !entityWireTypes(rows.FieldDescriptions()) {
				t.Fatalf("mode %v: the entity columns are not decoded from the wire", mode)
			}
			var out []*store.Entity
			for rows.Next() {
				e, err := scan(rows)
				if err != nil {
					t.Fatalf("mode %v: %v", mode, err)
				}
				out = append(out, e)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}
		wire := read(scanEntity)
		generic := read(func(r pgx.Rows) (*store.Entity, error) { return scanEntityGeneric(r) })
		if len(wire) != len(entities) || !reflect.DeepEqual(wire, generic) {
			for i := range wire {
				t.Errorf("mode %v: wire %+v\ngeneric %+v", mode, *wire[i], *generic[i])
			}
			t.FailNow()
		}
	}
}
