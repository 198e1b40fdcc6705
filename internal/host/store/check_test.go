package store_test

import (
	"testing"

	"github.com/factline/factline/internal/host/store"
)

func TestSlotFilterColumn(t *testing.T) {
	tests := []struct {
		slot    string
		value   any
		want    any
		wantErr bool
	}{
		{slot: "ix_s_1", value: "active", want: "active"},
		{slot: "ix_s_10", value: "x", want: "x"},
		{slot: "ix_n_5", value: 2.5, want: 2.5},
		{slot: "ix_n_1", value: 3, want: 3.0},
		{slot: "ix_n_1", value: int64(4), want: 4.0},
		{slot: "ix_s_1", value: 1.0, wantErr: true},
		{slot: "ix_n_1", value: "1", wantErr: true},
		{slot: "ix_s_11", value: "x", wantErr: true},
		{slot: "ix_n_6", value: 1.0, wantErr: true},
		{slot: "ix_s_01", value: "x", wantErr: true},
		{slot: "name; DROP TABLE entities", value: "x", wantErr: true},
	}
	for _, tt := range tests {
		col, v, err := store.SlotFilter{Slot: tt.slot, Value: tt.value}.Column()
		if tt.wantErr {
			if err == nil {
				t.Errorf("%s = %v: no error, column %q", tt.slot, tt.value, col)
			}
			continue
		}
		if err != nil || col != tt.slot || v != tt.want {
			t.Errorf("%s = %v: got %q %#v %v, want %#v", tt.slot, tt.value, col, v, err, tt.want)
		}
	}
}

func TestConfigPrepareVersion(t *testing.T) {
	superseded := int64(5)
	c := store.Config{Settings: []byte(`{"a":1}`), SupersededAt: &superseded}
	if err := c.PrepareVersion(); err != nil || c.Status != store.ConfigActive || c.SupersededAt != nil {
		t.Fatalf("got %v, status %q, superseded %v", err, c.Status, c.SupersededAt)
	}
	for _, bad := range []store.Config{{Status: "paused"}, {Settings: []byte(`{`)}} {
		if err := bad.PrepareVersion(); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}
