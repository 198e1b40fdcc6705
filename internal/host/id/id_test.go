package id

import (
	"strings"
	"testing"
)

func TestNewIsPrefixedAndOrdered(t *testing.T) {
	prev := ""
	for i := 0; i < 1000; i++ {
		v := New(Fact)
		if !HasPrefix(v, Fact) || len(v) != len("fct_")+26 {
			t.Fatalf("malformed id %q", v)
		}
		if v <= prev {
			t.Fatalf("ids not increasing: %s then %s", prev, v)
		}
		prev = v
	}
	if HasPrefix("fct_nope", Fact) || HasPrefix("ent_01H", Fact) {
		t.Fatal("HasPrefix accepts malformed ids")
	}
}

func TestDerive(t *testing.T) {
	parent := New(Fact)
	a := Derive(Fact, parent, "sub", "0")
	if a != Derive(Fact, parent, "sub", "0") {
		t.Fatal("Derive is not deterministic")
	}
	for _, other := range []string{Derive(Fact, parent, "sub", "1"), Derive(Fact, parent, "sub0"), Derive(Fact, New(Fact), "sub", "0")} {
		if other == a {
			t.Fatalf("distinct inputs gave the same id %s", a)
		}
	}
	if !HasPrefix(a, Fact) {
		t.Fatalf("derived id %q is not a valid fct_ id", a)
	}
	// The derived id keeps the parent's time.
	if a[4:14] != parent[4:14] {
		t.Fatalf("derived %s does not share the time of %s", a, parent)
	}
	// Non-ULID parents still give valid ids.
	if d := Derive(Fact, "acct-1", "x"); !HasPrefix(d, Fact) || strings.Contains(d, "acct") {
		t.Fatalf("derived from a plain id: %q", d)
	}
}
