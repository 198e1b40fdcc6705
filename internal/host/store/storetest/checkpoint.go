package storetest

import (
	"maps"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var checkpointTests = []test{
	{"GetSetList", testCheckpointGetSetList},
	{"SetMany", testCheckpointSetMany},
}

func testCheckpointGetSetList(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	pos, err := s.GetCheckpoint(ctx, "projection:balances")
	noErr(t, err, "GetCheckpoint of an unknown consumer")
	if pos != 0 {
		t.Errorf("unknown consumer: got %d, want 0", pos)
	}
	all, err := s.ListCheckpoints(ctx)
	noErr(t, err, "ListCheckpoints on an empty store")
	if len(all) != 0 {
		t.Errorf("ListCheckpoints on an empty store: got %v", all)
	}

	steps := []struct {
		consumer string
		position int64
	}{
		{"projection:balances", 10},
		{"webhook:wh_1", 3},
		{"projection:balances", 42}, // overwrite
		{"subscription:audit", 0},
		{"webhook:wh_1", 2}, // a lower position is stored as given
	}
	want := map[string]int64{}
	for _, st := range steps {
		noErr(t, s.SetCheckpoint(ctx, st.consumer, st.position), "SetCheckpoint")
		want[st.consumer] = st.position
		got, err := s.GetCheckpoint(ctx, st.consumer)
		noErr(t, err, "GetCheckpoint")
		if got != st.position {
			t.Errorf("GetCheckpoint(%s) after setting %d: got %d", st.consumer, st.position, got)
		}
	}
	all, err = s.ListCheckpoints(ctx)
	noErr(t, err, "ListCheckpoints")
	if !maps.Equal(all, want) {
		t.Errorf("ListCheckpoints: got %v, want %v", all, want)
	}

	noErr(t, s.DeleteCheckpoint(ctx, "webhook:wh_1"), "DeleteCheckpoint")
	noErr(t, s.DeleteCheckpoint(ctx, "never:existed"), "DeleteCheckpoint of an unknown consumer")
	delete(want, "webhook:wh_1")
	all, err = s.ListCheckpoints(ctx)
	noErr(t, err, "ListCheckpoints after DeleteCheckpoint")
	if !maps.Equal(all, want) {
		t.Errorf("ListCheckpoints after DeleteCheckpoint: got %v, want %v", all, want)
	}
	if pos, err := s.GetCheckpoint(ctx, "webhook:wh_1"); err != nil || pos != 0 {
		t.Errorf("GetCheckpoint of a deleted consumer: got %d, %v; want 0", pos, err)
	}
}

// testCheckpointSetMany: SetCheckpoints creates and moves many consumers'
// checkpoints in one call and leaves the others alone; an empty map is no
// write and no error.
func testCheckpointSetMany(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	noErr(t, s.SetCheckpoints(ctx, nil), "SetCheckpoints of nothing")
	noErr(t, s.SetCheckpoint(ctx, "other", 3), "SetCheckpoint")
	noErr(t, s.SetCheckpoint(ctx, "b", 1), "SetCheckpoint")
	noErr(t, s.SetCheckpoints(ctx, map[string]int64{"a": 10, "b": 20, "c": 30}), "SetCheckpoints")
	noErr(t, s.SetCheckpoints(ctx, map[string]int64{"c": 31}), "SetCheckpoints of one")
	all, err := s.ListCheckpoints(ctx)
	noErr(t, err, "ListCheckpoints")
	if want := map[string]int64{"other": 3, "a": 10, "b": 20, "c": 31}; !maps.Equal(all, want) {
		t.Errorf("ListCheckpoints after SetCheckpoints: got %v, want %v", all, want)
	}
}
