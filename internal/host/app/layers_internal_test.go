package app

import (
	"testing"

	"github.com/factline/factline/internal/host/store"
)

// TestLayerSetAdds: a stored set "adds" to the one a process read when it
// holds a manifest the process has not read, or another version of one;
// a removal adds nothing, so it turns no 404 into a 503.
func TestLayerSetAdds(t *testing.T) {
	set := func(pairs ...string) *layerSet {
		var ls []store.DomainLayer
		for i := 0; i+1 < len(pairs); i += 2 {
			ls = append(ls, store.DomainLayer{Name: pairs[i], SHA256: pairs[i+1]})
		}
		return newLayerSet(ls)
	}
	for _, tc := range []struct {
		name          string
		stored, seen  *layerSet
		adds, differs bool
	}{
		{"same", set("a", "1", "b", "2"), set("a", "1", "b", "2"), false, false},
		{"one added", set("a", "1", "b", "2"), set("a", "1"), true, true},
		{"one changed", set("a", "1", "b", "3"), set("a", "1", "b", "2"), true, true},
		{"one removed", set("a", "1"), set("a", "1", "b", "2"), false, true},
		{"all removed", set(), set("a", "1"), false, true},
	} {
		if got := tc.stored.adds(tc.seen); got != tc.adds {
			t.Errorf("%s: adds = %v, want %v", tc.name, got, tc.adds)
		}
		if got := tc.stored.digest != tc.seen.digest; got != tc.differs {
			t.Errorf("%s: digests differ = %v, want %v", tc.name, got, tc.differs)
		}
	}
}
