package projection

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Queries read without scripts (Redis runs plain commands several times
// faster than the same reads through Lua): the members of each planned
// range with ZRANGEBYSCORE, then pipelined pages of HGETALL (and
// PFCOUNT), each page checking before and after its reads that the meta
// the plan was made from has not changed (watermarks only grow, so equal
// at both ends means unchanged throughout); two pages are in flight at a
// time so that Redis reads one while Go decodes another.

// Buckets read by the first page and by the others.
const (
	redisLoadFirstPage = 128
	redisLoadPage      = 320
)

// errStale: the meta moved between planning and reading.
var errStale = errors.New("projection: watermarks moved during the query")

func (r *RedisState) load(ctx context.Context, key string, s *schema, version int, plan func(stateMeta) []planRange, aggregate bool, f *groupFilter) (*loaded, stateMeta, error) {
	if version == 1 {
		return r.loadBlob(ctx, key, s, plan, aggregate, f)
	}
	k := r.keys(key)
	// The plan depends on the meta only through rollup watermarks; without
	// rollups the members of the plan are read in the same round trip as
	// the meta.
	var spec []planRange
	if len(s.levels) == 1 {
		spec = plan(emptyMeta(s))
	}
	for attempt := 0; attempt < 20; attempt++ {
		pipe := r.rdb.Pipeline()
		mc := pipe.HMGet(ctx, k.meta(), metaFields(s)...)
		specMembers := r.queueMembers(ctx, pipe, k, s, spec)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, stateMeta{}, err
		}
		meta, raw, err := r.parseMeta(ctx, k, s, mc.Val())
		if err != nil {
			return nil, stateMeta{}, err
		}
		p := plan(meta)
		if meta.version == 0 {
			return &loaded{}, meta, nil
		}
		if meta.version != version {
			return nil, stateMeta{}, &errVersion{stored: meta.version}
		}
		if err := checkFingerprint(s, meta.fingerprint); err != nil {
			return nil, stateMeta{}, err
		}
		var members []*redis.StringSliceCmd
		if spec != nil && slices.Equal(p, spec) {
			members = specMembers
		}
		ld, err := r.loadPlan(ctx, k, s, raw, p, members, aggregate, f)
		if errors.Is(err, errStale) {
			continue
		}
		if err != nil {
			return nil, stateMeta{}, err
		}
		return ld, meta, nil
	}
	return nil, stateMeta{}, errors.New("projection: cached state kept changing during the query")
}

type bucketRef struct {
	level int
	mem   string
}

// queueMembers queues the reads of the members of every planned range.
func (r *RedisState) queueMembers(ctx context.Context, pipe redis.Pipeliner, k rkeys, s *schema, p []planRange) []*redis.StringSliceCmd {
	zs := make([]*redis.StringSliceCmd, len(p))
	for i, pr := range p {
		zs[i] = pipe.ZRangeByScore(ctx, k.index(s.levels[pr.level]), &redis.ZRangeBy{
			Min: strconv.FormatInt(pr.lo, 10), Max: "(" + strconv.FormatInt(pr.hi, 10)})
	}
	return zs
}

func (r *RedisState) loadPlan(ctx context.Context, k rkeys, s *schema, raw []string, p []planRange, zs []*redis.StringSliceCmd,
	aggregate bool, f *groupFilter) (*loaded, error) {
	out := &loaded{}
	if aggregate {
		out.agg = newCell(s)
	}
	if len(p) == 0 {
		return out, nil
	}
	if zs == nil {
		pipe := r.rdb.Pipeline()
		zs = r.queueMembers(ctx, pipe, k, s, p)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	var refs []bucketRef
	for i, pr := range p {
		w := s.levels[pr.level]
		for _, mem := range zs[i].Val() {
			if f.match(w, mem) {
				refs = append(refs, bucketRef{pr.level, mem})
			}
		}
	}
	names := fieldNames(s)
	dist, distIdx := distinctFields(s)
	fields := metaFields(s)

	// check queues the meta read that guards a page.
	check := func(pipe redis.Pipeliner) *redis.SliceCmd { return pipe.HMGet(ctx, k.meta(), fields...) }
	checked := func(c *redis.SliceCmd) error {
		vals, err := c.Result()
		if err != nil {
			return err
		}
		for i, v := range vals {
			sv, _ := v.(string)
			if i != 2 && sv != raw[i] { // through (2) may move
				return errStale
			}
		}
		return nil
	}

	// Page bounds: a small first page so that decoding starts early.
	bounds := []int{0}
	for next := min(redisLoadFirstPage, len(refs)); ; next = min(next+redisLoadPage, len(refs)) {
		if next > bounds[len(bounds)-1] {
			bounds = append(bounds, next)
		}
		if next >= len(refs) {
			break
		}
	}
	nPages := len(bounds) - 1
	pages := make([][]loadedBucket, nPages)
	errs := make([]error, nPages)
	readPage := func(ctx context.Context, pi int) error {
		part := refs[bounds[pi]:bounds[pi+1]]
		hs := make([]*redis.MapStringStringCmd, len(part))
		var pcs []*redis.IntCmd
		var before, after *redis.SliceCmd
		_, err := r.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			before = check(pipe)
			for i, b := range part {
				w := s.levels[b.level]
				hs[i] = pipe.HGetAll(ctx, k.bucket(w, b.mem))
				if !aggregate {
					for _, d := range dist {
						pcs = append(pcs, pipe.PFCount(ctx, k.hll(d, w, b.mem)))
					}
				}
			}
			after = check(pipe)
			return nil
		})
		if err != nil {
			return err
		}
		// Watermarks only grow: equal before and after means unchanged
		// throughout the page.
		if err := checked(before); err != nil {
			return err
		}
		if err := checked(after); err != nil {
			return err
		}
		bs := make([]loadedBucket, len(part))
		var slab cellSlab
		var flat []string
		for i, b := range part {
			flat = flat[:0]
			for f, v := range hs[i].Val() {
				flat = append(flat, f, v)
			}
			c, err := cellFromFieldsInto(slab.next(s), s, flat, names)
			if err != nil {
				return err
			}
			if !aggregate {
				for di, fi := range distIdx {
					c.f[fi].dcount, c.f[fi].dset = pcs[i*len(dist)+di].Val(), true
				}
			}
			bs[i] = loadedBucket{level: b.level, member: b.mem, c: c}
			if !aggregate && !s.flat() {
				bs[i].out = c.render(s) // rendered here, overlapping the next page's read
			}
		}
		pages[pi] = bs
		return nil
	}
	if nPages <= 1 {
		if nPages == 1 {
			if err := readPage(ctx, 0); err != nil {
				return nil, err
			}
		}
	} else {
		gctx, cancel := context.WithCancel(ctx)
		defer cancel()
		next := make(chan int)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for pi := range next {
					if err := readPage(gctx, pi); err != nil {
						errs[pi] = err
						cancel()
					}
				}
			}()
		}
		for pi := range pages {
			select {
			case next <- pi:
			case <-gctx.Done():
			}
		}
		close(next)
		wg.Wait()
		for _, err := range errs {
			if err != nil && (errors.Is(err, errStale) || !errors.Is(err, context.Canceled)) {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if !aggregate {
		for _, pg := range pages {
			out.buckets = append(out.buckets, pg...)
		}
		return out, nil
	}
	for _, pg := range pages {
		for _, b := range pg {
			out.agg.merge(s, b.c)
		}
	}
	// Distinct counts of the union: PFCOUNT of several keys merges them
	// without writing.
	if len(dist) > 0 && len(refs) > 0 {
		unions := make([]*redis.IntCmd, len(dist))
		var guard *redis.SliceCmd
		_, err := r.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			guard = check(pipe)
			for di, d := range dist {
				keys := make([]string, len(refs))
				for i, b := range refs {
					keys[i] = k.hll(d, s.levels[b.level], b.mem)
				}
				unions[di] = pipe.PFCount(ctx, keys...)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if err := checked(guard); err != nil {
			return nil, err
		}
		for di, fi := range distIdx {
			out.agg.f[fi].dcount, out.agg.f[fi].dset = unions[di].Val(), true
		}
	}
	return out, nil
}
