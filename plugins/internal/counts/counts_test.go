package counts

import (
	"testing"

	"github.com/factline/factline/sdk"
)

func TestCounts(t *testing.T) {
	t.Parallel()
	var c Counts
	for _, n := range []string{"no_answer", "deal_won", "no_answer", "answered"} {
		c = c.Add(n)
	}
	var e sdk.Encoder
	c.EncodeJSON(&e)
	if got := string(e.Bytes()); got != `{"answered":1,"deal_won":1,"no_answer":2}` {
		t.Fatalf("encoded %s", got)
	}
	var d Counts
	if err := d.DecodeJSON(sdk.NewDecoder([]byte(`{"z":1,"a":2,"m":3}`))); err != nil {
		t.Fatal(err)
	}
	if d.Get("a") != 2 || d.Get("m") != 3 || d.Get("z") != 1 || d.Get("x") != 0 || d[0].Name != "a" {
		t.Fatalf("decoded %v", d)
	}
	if err := d.DecodeJSON(sdk.NewDecoder([]byte(`{"a":"x"}`))); err == nil {
		t.Fatal("a non-integer count decoded")
	}
}
