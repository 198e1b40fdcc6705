package projection

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Rollups of the Redis state: sealing levels and retention.

// Rollup budgets: children merged and buckets deleted per script call.
const (
	redisRollupBudget    = 2000
	redisRetentionBudget = 2000
)

func (r *RedisState) rollup(ctx context.Context, key string, s *schema, version int, now int64) (rollupStats, error) {
	if version == 1 {
		return r.rollupBlob(ctx, key, s, now)
	}
	k := r.keys(key)
	meta, _, err := r.readMeta(ctx, k, s)
	if err != nil {
		return rollupStats{}, err
	}
	if meta.version == 0 {
		return rollupStats{}, nil
	}
	if meta.version != version {
		return rollupStats{}, &errVersion{stored: meta.version}
	}
	keys := []string{k.meta(), k.lock()}
	dist, _ := distinctFields(s)
	var st rollupStats
	wm := meta.wm
	for j := 1; j < len(s.levels); j++ {
		limit := rollupLimit(s, wm, j, now)
		if limit == noTime || limit <= wm[j] {
			continue
		}
		for budget := redisRollupBudget; wm[j] < limit; {
			n, newWm, err := r.sealStep(ctx, k, s, version, keys, j, wm[j], limit, budget)
			switch {
			case errors.Is(err, errGrow):
				budget *= 4 // one parent has more children than the budget
				continue
			case errors.Is(err, errStale):
				// The children changed under us (a late fact); read again.
				m2, _, err := r.readMeta(ctx, k, s)
				if err != nil {
					return st, err
				}
				wm[j] = m2.wm[j]
				continue
			case errors.Is(err, errNothingStored):
				return st, nil
			case err != nil:
				return st, err
			}
			st.Sealed += n
			wm[j] = newWm
		}
	}
	for j := range s.levels {
		h := retentionHorizon(s, wm, j, now)
		if h == noTime || h <= meta.del[j] {
			continue
		}
		for {
			args := []any{k.base, strconv.Itoa(version), s.fingerprint, string(s.levels[j]), h, redisRetentionBudget, len(dist)}
			for _, d := range dist {
				args = append(args, d)
			}
			res, err := r.run(ctx, retentionScript, keys, args...)
			if err != nil {
				return st, err
			}
			if err := scriptStatus(res); err != nil {
				return st, err
			}
			n, _ := res[0].(int64)
			st.Deleted += int(n)
			if complete, _ := res[1].(int64); complete == 1 {
				break
			}
		}
	}
	return st, nil
}

var errGrow = errors.New("projection: rollup budget too small")

// sealStep seals level j from wm toward limit, at most about budget
// children at a time, and returns the parents sealed and the new
// watermark. It reads the children and their sketches, merges the
// sketches per parent in Go (Redis merging sparse sketches is slow), and
// lets sealScript check that nothing changed before it writes.
func (r *RedisState) sealStep(ctx context.Context, k rkeys, s *schema, version int, keys []string, j int, wm, limit int64, budget int) (int, int64, error) {
	cw, pw := s.levels[j-1], s.levels[j]
	lo := "-inf"
	if wm != noTime {
		lo = strconv.FormatInt(wm, 10)
	}
	zs, err := r.rdb.ZRangeByScoreWithScores(ctx, k.index(cw), &redis.ZRangeBy{
		Min: lo, Max: "(" + strconv.FormatInt(limit, 10), Count: int64(budget + 1)}).Result()
	if err != nil {
		return 0, 0, err
	}
	newWm := limit
	if len(zs) > budget {
		// Stop before the parent of the last child read: all of its
		// children may not be in this page.
		newWm = pw.start(int64(zs[len(zs)-1].Score))
		if newWm <= pw.start(int64(zs[0].Score)) {
			return 0, 0, errGrow
		}
		for len(zs) > 0 && pw.start(int64(zs[len(zs)-1].Score)) >= newWm {
			zs = zs[:len(zs)-1]
		}
	}
	dist, distIdx := distinctFields(s)
	pipe := r.rdb.Pipeline()
	ns := make([]*redis.StringCmd, len(zs))
	hs := make([][]distinctRead, len(zs))
	for i, z := range zs {
		mem := z.Member.(string)
		ns[i] = pipe.HGet(ctx, k.bucket(cw, mem), "n")
		for _, d := range dist {
			hs[i] = append(hs[i], queueDistinct(ctx, pipe, k, d, j-1, cw, mem))
		}
	}
	if len(zs) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, 0, err
		}
	}
	hasGroups := len(s.groups) > 0
	type pkey struct {
		field int
		mem   string
	}
	parents := map[pkey]*fieldCell{}
	var order []pkey
	args := []any{k.base, strconv.Itoa(version), s.fingerprint, string(cw), string(pw), fmtWatermark(wm), newWm,
		map[Window]string{Hour: "h", Day: "d", Month: "m"}[pw], cw.bucketLen(), pw.bucketLen(), len(zs)}
	for i, z := range zs {
		mem := z.Member.(string)
		args = append(args, mem, int64(z.Score), ns[i].Val())
		pm := member(pw, pw.start(int64(z.Score)), memberGroups(cw, mem), hasGroups)
		for di, rd := range hs[i] {
			key := pkey{di, pm}
			if parents[key] == nil {
				parents[key] = &fieldCell{approx: true}
				order = append(order, key)
			}
			if err := rd.into(parents[key]); err != nil {
				return 0, 0, err
			}
		}
	}
	order = slices.DeleteFunc(order, func(pk pkey) bool { return parents[pk].hll == nil })
	args = append(args, len(order))
	for _, pk := range order {
		args = append(args, s.fields[distIdx[pk.field]].name, pk.mem, string(parents[pk].hll.Redis()))
	}
	if r.root.beforeSeal != nil {
		r.root.beforeSeal()
	}
	res, err := r.run(ctx, sealScript, keys, args...)
	if err != nil {
		return 0, 0, err
	}
	if code, _ := res[0].(int64); code == -7 {
		return 0, 0, errStale
	}
	if err := scriptStatus(res); err != nil {
		return 0, 0, err
	}
	sealed, _ := res[1].(int64)
	return int(sealed), newWm, nil
}
