package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/projection/internal/hll"
)

// distinctRead is a queued read of one bucket's distinct values: the set
// of values of a base bucket, or the sketch of a rollup bucket.
type distinctRead struct {
	key  string
	vals *redis.StringSliceCmd
	sk   *redis.StringCmd
}

// queueDistinct queues the read of the distinct values of field in the
// bucket mem of level (window w).
func queueDistinct(ctx context.Context, pipe redis.Pipeliner, k rkeys, field string, level int, w Window, mem string) distinctRead {
	key := k.distinct(field, w, mem)
	if level == 0 {
		return distinctRead{key: key, vals: pipe.SMembers(ctx, key)}
	}
	return distinctRead{key: key, sk: pipe.Get(ctx, key)}
}

// into adds what was read to fc.
func (d distinctRead) into(fc *fieldCell) error {
	if d.vals != nil {
		vals, err := d.vals.Result()
		if err != nil {
			return err
		}
		for _, v := range vals {
			fc.addDistinct(v)
		}
		return nil
	}
	b, err := d.sk.Bytes()
	if errors.Is(err, redis.Nil) {
		fc.toSketch()
		return nil
	}
	if err != nil {
		return err
	}
	sk, err := hll.FromRedis(b)
	if err != nil {
		return fmt.Errorf("projection: %s: %w", d.key, err)
	}
	fc.mergeDistinct(&fieldCell{approx: true, hll: sk})
	return nil
}

// anyKeys yields the values of a set as SADD arguments.
func anyKeys(set map[string]struct{}) func(yield func(any) bool) {
	return func(yield func(any) bool) {
		for v := range set {
			if !yield(v) {
				return
			}
		}
	}
}
