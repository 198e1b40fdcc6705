package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

func TestNumbersOutsideTheStoredRangeAreRefused(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want bool
	}{
		{"0", true}, {"-0.1", true}, {"1e308", true}, {"-1.7976931348623157e308", true},
		{"5e-324", true}, {"0e-1000", true}, {"123456789012345678.123456789012345678", true},
		{strings.Repeat("9", store.MaxNumberDigits), true}, {strings.Repeat("9", store.MaxNumberDigits+1), false},
		{"0." + strings.Repeat("1", store.MaxNumberDigits-1), true},
		{"0." + strings.Repeat("1", store.MaxNumberDigits), false},
		{"1e1000000000", false}, {"-1e1000000000", false}, {"1e309", false},
		{"1e-400", false}, {"0e1001", false}, {"1E+99999999999999999999", false},
	} {
		if got := store.NumberInRange([]byte(tc.lit)); got != tc.want {
			t.Errorf("NumberInRange(%.40s) = %v, want %v", tc.lit, got, tc.want)
		}
	}
}

func TestInspectNamesEveryBadValueByItsPath(t *testing.T) {
	doc := "{\"a\":\"ok\",\"b\":\"bad\xff\",\"c\":{\"d\":[1,\"\\u0000\",{\"e\":1e999}]},\"k\\u0000\":true,\"s\":\"\\ud83d\\ude00\",\"l\":\"\\udc00\"}"
	sh := store.Inspect([]byte(doc), "settings")
	var got []string
	for _, b := range sh.Bad {
		got = append(got, b.Field+":"+b.Reason)
		if !errors.Is(b, store.ErrInvalidInput) {
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
