package storable_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/factline/factline/internal/storable"
)

func TestNumbersOutsideTheStoredRangeAreRefused(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want bool
	}{
		{"0", true}, {"-0.1", true}, {"123456789012345678.123456789012345678", true},
		// Exponents count written out, as the number is stored.
		{"1e99", true}, {"1e100", false}, {"1e-99", true}, {"1e-100", false}, {"1.5e98", true},
		{"1e308", false}, {"-1.7976931348623157e308", false}, {"5e-324", false}, {"0e-1000", false},
		{"0e99", true}, {"1E+2", true},
		{strings.Repeat("9", storable.MaxNumberDigits), true}, {strings.Repeat("9", storable.MaxNumberDigits+1), false},
		{"0." + strings.Repeat("1", storable.MaxNumberDigits-1), true},
		{"0." + strings.Repeat("1", storable.MaxNumberDigits), false},
		{"1e1000000000", false}, {"-1e1000000000", false}, {"1e309", false},
		{"1e-400", false}, {"0e1001", false}, {"1E+99999999999999999999", false},
	} {
		if got := storable.NumberInRange([]byte(tc.lit)); got != tc.want {
			t.Errorf("NumberInRange(%.40s) = %v, want %v", tc.lit, got, tc.want)
		}
	}
}

func TestInspectNamesEveryBadValueByItsPath(t *testing.T) {
	doc := "{\"a\":\"ok\",\"b\":\"bad\xff\",\"c\":{\"d\":[1,\"\\u0000\",{\"e\":1e999}]},\"k\\u0000\":true,\"s\":\"\\ud83d\\ude00\",\"l\":\"\\udc00\"}"
	sh := storable.Inspect([]byte(doc), "settings")
	var got []string
	for _, b := range sh.Bad {
		got = append(got, b.Field+":"+b.Reason)
		if !errors.Is(b, storable.ErrInvalidInput) {
			t.Errorf("%v is not ErrInvalidInput", b)
		}
	}
	want := []string{"settings.b:utf8", "settings.c.d[1]:nul", "settings.c.d[2].e:number", "settings.k\uFFFD:nul", "settings.l:utf8"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("bad values %q, want %q", got, want)
	}
	if sh.Depth != 4 || sh.Keys != 8 {
		t.Errorf("depth %d keys %d, want 4 and 8", sh.Depth, sh.Keys)
	}
}

func TestInspectPathsWithoutPrefix(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"[1,\"\\u0000\"]", "[1]"},
		{"{\"a\":[{\"b\":\"\\u0000\"}]}", "a[0].b"},
		{"\"\\u0000\"", ""},
	} {
		bad := storable.Inspect([]byte(tc.doc), "").Bad
		if len(bad) != 1 || bad[0].Field != tc.want {
			t.Errorf("Inspect(%s): %v, want one bad value at %q", tc.doc, bad, tc.want)
		}
	}
}

// TestInspectDeepDocumentsInLinearWork: a hostile body nested tens of
// thousands of levels deep (64 KiB is enough) is walked without building
// each level's path, which cost the square of the depth.
func TestInspectDeepDocumentsInLinearWork(t *testing.T) {
	const depth = 20_000
	for _, open := range []string{`{"a":`, "["} {
		closing := "}"
		if open == "[" {
			closing = "]"
		}
		doc := []byte(strings.Repeat(open, depth) + "1e999" + strings.Repeat(closing, depth))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		sh := storable.Inspect(doc, "data")
		runtime.ReadMemStats(&after)
		if sh.Depth != depth || len(sh.Bad) != 1 {
			t.Fatalf("%s: depth %d, %d bad values", open, sh.Depth, len(sh.Bad))
		}
		// Paths built level by level allocate 400-600 MB here; the walk
		// itself a few (its path stack and the decoded keys).
		if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
			t.Errorf("%s: %d bytes allocated for a document of %d bytes, %d levels deep", open, n, len(doc), depth)
		}
	}
}

// TestInspectRefusesDuplicateMembers: jsonb keeps an object's last
// member of a name and a text column keeps every one, so a document with
// a duplicate would be stored differently by the two stores.
func TestInspectRefusesDuplicateMembers(t *testing.T) {
	many := make([]string, 40)
	for i := range many {
		many[i] = `"k` + strings.Repeat("x", i) + `":1`
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"a":1,"a":2}`, "a:duplicate"},
		{`{"a":1,"b":{"a":1,"c":[{"d":1,"d":{"a":1,"a":1}}]}}`, "b.c[0].d:duplicate b.c[0].d.a:duplicate"},
		{`{"a":1,"\u0061":2}`, "a:duplicate"},
		{`[{"a":1},{"a":1}]`, ""},
		{`{` + strings.Join(many, ",") + `,"kxxx":2}`, "kxxx:duplicate"},
		{`{` + strings.Join(many, ",") + `}`, ""},
	} {
		var got []string
		for _, b := range storable.Inspect([]byte(tc.doc), "").Bad {
			got = append(got, b.Field+":"+b.Reason)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Inspect(%.60s): %q, want %q", tc.doc, got, tc.want)
		}
	}
	err := storable.CheckDocument("data", []byte(`{"x":1,"x":1}`))
	if !errors.Is(err, storable.ErrInvalidInput) || err.Error() != "data.x appears more than once in its object" {
		t.Errorf("CheckDocument: %v", err)
	}
}
