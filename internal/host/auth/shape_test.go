package auth

import (
	"regexp"
	"strings"
	"testing"
)

// keyShapeRe is the shape wellFormed writes out.
var keyShapeRe = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*_[A-Za-z0-9]{16,128}$`)

var shapeSeeds = []string{
	"fl_live_" + strings.Repeat("a", 43), "fl_live_" + strings.Repeat("Z9", 8), "fl_admin_" + strings.Repeat("x", 128),
	"fl_live_" + strings.Repeat("x", 129), "fl_live_" + strings.Repeat("x", 15), "a_" + strings.Repeat("0", 16),
	"_" + strings.Repeat("0", 16), "fl__live_" + strings.Repeat("a", 20), "fl_live__" + strings.Repeat("a", 20),
	"Fl_live_" + strings.Repeat("a", 20), "1l_live_" + strings.Repeat("a", 20), "fl_li-ve_" + strings.Repeat("a", 20),
	"fl_live_" + strings.Repeat("a", 19) + "-", "fl_live_" + strings.Repeat("a", 19) + "é", "", "_", "fl_live_",
	"fl" + strings.Repeat("a", 20), "fl_LIVE_" + strings.Repeat("a", 20), "f_" + strings.Repeat("a", 16) + "\n",
}

func TestWellFormed(t *testing.T) {
	for _, k := range shapeSeeds {
		if got, want := wellFormed(k), keyShapeRe.MatchString(k); got != want {
			t.Errorf("wellFormed(%q) = %v, want %v", k, got, want)
		}
	}
}

func FuzzWellFormed(f *testing.F) {
	for _, k := range shapeSeeds {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if got, want := wellFormed(k), keyShapeRe.MatchString(k); got != want {
			t.Fatalf("wellFormed(%q) = %v, the pattern says %v", k, got, want)
		}
	})
}
