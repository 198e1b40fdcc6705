package hll

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func client(t *testing.T) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testutil.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestMatchesRedis checks registers and counts against a real Redis for
// cardinalities across the sparse/dense boundary and the small-count range.
func TestMatchesRedis(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := context.Background()
	for _, n := range []int{0, 1, 2, 3, 10, 100, 500, 1000, 3000, 5000, 20000, 100000} {
		key := fmt.Sprintf("h%d", n)
		var s Sketch
		pipe := c.Pipeline()
		for i := 0; i < n; i++ {
			e := fmt.Sprintf("user-%d-%s", i, string(rune('a'+i%26)))
			s.AddString(e)
			pipe.PFAdd(ctx, key, e)
			if pipe.Len() >= 5000 {
				if _, err := pipe.Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && n > 0 {
			t.Fatal(err)
		}
		want, err := c.PFCount(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Count(); got != uint64(want) {
			t.Errorf("n=%d: Count %d, Redis PFCOUNT %d", n, got, want)
		}
		if n == 0 {
			continue
		}
		raw, err := c.Get(ctx, key).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		r, err := FromRedis(raw)
		if err != nil {
			t.Fatalf("n=%d: FromRedis: %v", n, err)
		}
		if !r.Equal(&s) {
			t.Errorf("n=%d: registers decoded from Redis differ from the local sketch", n)
		}
		// Write both encodings back and let Redis count them.
		for name, enc := range map[string][]byte{"dense": s.RedisDense(), "sparse": s.RedisSparse()} {
			if enc == nil {
				continue
			}
			k := key + name
			if err := c.Set(ctx, k, enc, 0).Err(); err != nil {
				t.Fatal(err)
			}
			got, err := c.PFCount(ctx, k).Result()
			if err != nil {
				t.Fatalf("n=%d %s: PFCOUNT of our encoding: %v", n, name, err)
			}
			if got != want {
				t.Errorf("n=%d %s: Redis counts our encoding as %d, want %d", n, name, got, want)
			}
			// Redis can keep adding to it.
			if err := c.PFAdd(ctx, k, "extra-element").Err(); err != nil {
				t.Fatalf("n=%d %s: PFADD to our encoding: %v", n, name, err)
			}
		}
	}
}

func TestMergeIsUnion(t *testing.T) {
	t.Parallel()
	var a, b, all Sketch
	for i := 0; i < 20000; i++ {
		e := fmt.Sprint(i)
		all.AddString(e)
		if i%3 == 0 {
			a.AddString(e)
		} else {
			b.AddString(e)
		}
	}
	a.Merge(&b)
	if !a.Equal(&all) || a.Count() != all.Count() {
		t.Fatal("merge of two halves differs from the sketch of the whole")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 5, 4000} {
		var s Sketch
		for i := 0; i < n; i++ {
			s.AddString(fmt.Sprint("x", i))
		}
		b, _ := s.MarshalBinary()
		var r Sketch
		if err := r.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if !r.Equal(&s) {
			t.Fatalf("n=%d: round trip changed registers", n)
		}
	}
}

// TestErrorBound checks the stated bound (2.5%) on 1,000,000 distinct
// values.
func TestErrorBound(t *testing.T) {
	t.Parallel()
	var s Sketch
	const n = 1_000_000
	buf := make([]byte, 0, 16)
	for i := 0; i < n; i++ {
		buf = fmt.Appendf(buf[:0], "v%d", i)
		s.Add(buf)
	}
	got := float64(s.Count())
	if e := math.Abs(got-n) / n; e > 0.025 {
		t.Fatalf("count %v for %d distinct values: error %.2f%% > 2.5%%", got, n, 100*e)
	} else {
		t.Logf("count %v for %d distinct values: error %.3f%%", got, n, 100*e)
	}
}
