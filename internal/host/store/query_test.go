package store_test

import (
	"reflect"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

func TestFactFilterCondsInDriverOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    store.FactFilter
		want []store.Cond
	}{
		{"tenant only", store.FactFilter{TenantID: "t"}, nil},
		{"subtype without type is ignored", store.FactFilter{Subtype: "s"}, nil},
		{"every filter", store.FactFilter{Type: "webhook", Subtype: "sent", SourceID: "fct_1", EntityID: "ent_1",
			From: 10, To: 20, AfterPosition: 5}, []store.Cond{
			{SQL: "type =", Arg: "webhook"}, {SQL: "subtype =", Arg: "sent"}, {SQL: "source_id =", Arg: "fct_1"},
			{SQL: "entity_id =", Arg: "ent_1"}, {SQL: "timestamp >=", Arg: int64(10)}, {SQL: "timestamp <=", Arg: int64(20)},
			{SQL: "position >", Arg: int64(5)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.Conds(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Conds() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFactScanConds(t *testing.T) {
	q := store.FactScan{TenantID: "t", Types: []string{"a"}, EntityType: "account", To: 7}
	want := []store.Cond{{SQL: "entity_type =", Arg: "account"}, {SQL: "timestamp <=", Arg: int64(7)}}
	if got := q.Conds(); !reflect.DeepEqual(got, want) {
		t.Errorf("Conds() = %v, want %v", got, want)
	}
}

func TestConfigFilterConds(t *testing.T) {
	f := store.ConfigFilter{TenantID: "t", Type: "webhook", Status: "active", AfterID: "cfg_1"}
	want := []store.Cond{{SQL: "type =", Arg: "webhook"}, {SQL: "status =", Arg: "active"}, {SQL: "id >", Arg: "cfg_1"}}
	if got := f.Conds(); !reflect.DeepEqual(got, want) {
		t.Errorf("Conds() = %v, want %v", got, want)
	}
}
