package projection

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/push"
)

// Queries read without scripts (Redis runs plain commands several times
// faster than the same reads through Lua): the members of each planned
// range with ZRANGEBYSCORE, then pipelined pages of HGETALL (and
// SCARD or PFCOUNT), each page checking before and after its reads that the meta
// the plan was made from has not changed (watermarks only grow, so equal
// at both ends means unchanged throughout); two pages are in flight at a
// time so that Redis reads one while Go decodes another.
//
// Most of a query's time is per bucket in Go: the command, its reply and
// the result object, and the garbage collection of all three. So replies
// are read raw (RESP bytes, see decodeRawHash) and decoded straight into
// one reused cell that is rendered at once; the commands of a page, their
// arguments and keys come from a few shared allocations. When the client
// can track keys, the query cache (below) spares the reads of buckets
// that have not changed since it read them.

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
	// Distinct counts of single buckets (SCARD, or PFCOUNT, which Redis
	// does not track as it may write) are not cached.
	if qc := r.queryCache(); qc != nil && (aggregate || !s.hasDist) && qc.mu.TryLock() {
		ld, meta, err, ok := qc.load(ctx, r, key, s, version, plan, aggregate, f)
		qc.mu.Unlock()
		if ok {
			return ld, meta, err
		}
	}
	return r.loadRounds(ctx, key, s, version, plan, r.rdb.Pipeline, nil,
		func(k rkeys, raw []string, p []planRange, zs []*redis.StringSliceCmd) (*loaded, error) {
			return r.loadPlan(ctx, k, s, raw, p, zs, aggregate, f)
		})
}

// loadRounds reads the meta, plans, and loads the plan with loadPlan,
// again while the meta moves under the reads (errStale). newPipe makes the
// pipelines of the meta round trip; first, when set, queues more commands
// into it and returns what checks them.
func (r *RedisState) loadRounds(ctx context.Context, key string, s *schema, version int, plan func(stateMeta) []planRange,
	newPipe func() redis.Pipeliner, first func(redis.Pipeliner) func() error,
	loadPlan func(k rkeys, raw []string, p []planRange, zs []*redis.StringSliceCmd) (*loaded, error)) (*loaded, stateMeta, error) {
	k := r.keys(key)
	// The plan depends on the meta only through rollup watermarks; without
	// rollups the members of the plan are read in the same round trip as
	// the meta.
	var spec []planRange
	if len(s.levels) == 1 {
		spec = plan(emptyMeta(s))
	}
	for attempt := 0; attempt < 20; attempt++ {
		pipe := newPipe()
		var after func() error
		if first != nil {
			after = first(pipe)
		}
		mc := pipe.HMGet(ctx, k.meta(), metaFields(s)...)
		specMembers := r.queueMembers(ctx, pipe, k, s, spec)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, stateMeta{}, err
		}
		if after != nil {
			if err := after(); err != nil {
				return nil, stateMeta{}, err
			}
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
		ld, err := loadPlan(k, raw, p, members)
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

// keyArgs returns the arguments of one command per bucket of refs, (cmd,
// *key) one after the other, where key is sparseKey(base, window, member),
// with few allocations: the keys share one string, and go-redis takes a
// *string without boxing it.
func keyArgs(cmd, base string, s *schema, refs []bucketRef) []any {
	n := 0
	for _, b := range refs {
		n += len(base) + 2 + len(s.levels[b.level]) + len(b.mem)
	}
	buf := make([]byte, 0, n)
	for _, b := range refs {
		buf = appendSparseKey(buf, base, s.levels[b.level], b.mem)
	}
	all := string(buf)
	keys := make([]string, len(refs))
	args := make([]any, 2*len(refs))
	name := any(cmd) // boxed once
	for i, b := range refs {
		n := len(base) + 1 + len(s.levels[b.level])
		if b.mem != "" {
			n += 1 + len(b.mem)
		}
		keys[i], all = all[:n], all[n:]
		args[2*i], args[2*i+1] = name, &keys[i]
	}
	return args
}

// readsRollups reports whether a rollup bucket is among refs.
func readsRollups(refs []bucketRef) bool {
	return slices.ContainsFunc(refs, func(b bucketRef) bool { return b.level > 0 })
}

// refsOf lists the buckets of the plan that pass the filter, given the
// members of each planned range.
func refsOf(s *schema, p []planRange, zs []*redis.StringSliceCmd, f *groupFilter) []bucketRef {
	n := 0
	for i := range p {
		n += len(zs[i].Val())
	}
	refs := make([]bucketRef, 0, n)
	for i, pr := range p {
		w := s.levels[pr.level]
		for _, mem := range zs[i].Val() {
			if f.match(w, mem) {
				refs = append(refs, bucketRef{pr.level, mem})
			}
		}
	}
	return refs
}

// metaGuard checks that the meta a plan was made from (raw, the values of
// metaFields) has not moved: watermarks only grow, so the meta read equal
// before and after some reads means unchanged throughout them.
type metaGuard struct {
	args []any // HMGET of metaFields
	raw  []string
	ctx  context.Context
}

func newMetaGuard(ctx context.Context, k rkeys, s *schema, raw []string) *metaGuard {
	fields := metaFields(s)
	args := make([]any, 0, 2+len(fields))
	args = append(args, "hmget", k.meta())
	for _, f := range fields {
		args = append(args, f)
	}
	return &metaGuard{args: args, raw: raw, ctx: ctx}
}

// check returns a read of the meta, to queue.
func (g *metaGuard) check() *redis.SliceCmd { return redis.NewSliceCmd(g.ctx, g.args...) }

// checked returns errStale when the meta read differs.
func (g *metaGuard) checked(c *redis.SliceCmd) error {
	vals, err := c.Result()
	if err != nil {
		return err
	}
	for i, v := range vals {
		sv, _ := v.(string)
		if i != 2 && sv != g.raw[i] { // through (2) may move
			return errStale
		}
	}
	return nil
}

// distinctUnion sets the distinct counts of agg, the union of the buckets
// of refs: exact while they are all base buckets (the union of their sets
// of values), through sketches once a rollup bucket is among them. Each
// bucket's values are read by a command of their own, in one pipeline
// between two reads of the meta, rather than one SUNION: Redis serves
// other clients between buckets however many values the range holds.
func (r *RedisState) distinctUnion(ctx context.Context, k rkeys, s *schema, refs []bucketRef, g *metaGuard, agg *cell) error {
	dist, distIdx := distinctFields(s)
	if len(dist) == 0 || len(refs) == 0 {
		return nil
	}
	reads := make([][]distinctRead, len(dist))
	before, after := g.check(), g.check()
	pipe := r.rdb.Pipeline()
	_ = pipe.Process(ctx, before)
	for di, d := range dist {
		reads[di] = make([]distinctRead, len(refs))
		for i, b := range refs {
			reads[di][i] = queueDistinct(ctx, pipe, k, d, b.level, s.levels[b.level], b.mem)
		}
	}
	_ = pipe.Process(ctx, after)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if err := g.checked(before); err != nil {
		return err
	}
	if err := g.checked(after); err != nil {
		return err
	}
	for di, fi := range distIdx {
		var fc fieldCell
		for _, rd := range reads[di] {
			if err := rd.into(&fc); err != nil {
				return err
			}
		}
		agg.f[fi].dcount, agg.f[fi].dset = fc.distinct(), true
	}
	return nil
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
	refs := refsOf(s, p, zs, f)
	out.rollups = readsRollups(refs)
	names := fieldNames(s)
	dist, distIdx := distinctFields(s)
	g := newMetaGuard(ctx, k, s, raw)

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
	var buckets []loadedBucket // pages write their part
	var aggs []*cell           // one per page
	if aggregate {
		aggs = make([]*cell, nPages)
	} else {
		buckets = make([]loadedBucket, len(refs))
	}
	errs := make([]error, nPages)
	readPage := func(ctx context.Context, pi int) error {
		part := refs[bounds[pi]:bounds[pi+1]]
		args := keyArgs("hgetall", k.base, s, part)
		// The commands of a page come from few allocations: a RawCmd is a
		// plain value until it is queued.
		raws := make([]redis.RawCmd, len(part))
		cmds := make([]redis.Cmder, 0, 2+len(part)*(1+len(dist)))
		before, after := g.check(), g.check()
		cmds = append(cmds, before)
		for i := range part {
			raws[i] = *redis.NewRawCmd(ctx, args[2*i:2*i+2:2*i+2]...)
			cmds = append(cmds, &raws[i])
		}
		// Distinct counts: pcs[di*len(part)+i] of distinct field di of
		// bucket i.
		var pcs []redis.IntCmd
		if !aggregate && len(dist) > 0 {
			pcs = make([]redis.IntCmd, len(part)*len(dist))
			for di, d := range dist {
				// A set's size in a base bucket, a sketch's estimate in a
				// rollup bucket.
				args := keyArgs("scard", k.distinctBase(d), s, part)
				var rollupArgs []any
				for i, b := range part {
					a := args
					if b.level > 0 {
						if rollupArgs == nil {
							rollupArgs = keyArgs("pfcount", k.distinctBase(d), s, part)
						}
						a = rollupArgs
					}
					pc := &pcs[di*len(part)+i]
					*pc = *redis.NewIntCmd(ctx, a[2*i:2*i+2:2*i+2]...)
					cmds = append(cmds, pc)
				}
			}
		}
		cmds = append(cmds, after)
		pipe := r.rdb.Pipeline()
		_ = pipe.BatchProcess(ctx, cmds...)
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		// Watermarks only grow: equal before and after means unchanged
		// throughout the page.
		if err := g.checked(before); err != nil {
			return err
		}
		if err := g.checked(after); err != nil {
			return err
		}
		d := hashDecoder{s: s, names: names}
		if aggregate {
			// Merged page by page: the page's cell, then the pages.
			agg, scratch := newCell(s), newCell(s)
			for i := range part {
				scratch.n = 0
				clear(scratch.f)
				if err := decodeRawHash(&d, scratch, raws[i].Val()); err != nil {
					return err
				}
				agg.merge(s, scratch)
			}
			aggs[pi] = agg
			return nil
		}
		bs := buckets[bounds[pi]:bounds[pi+1]]
		if s.flat() {
			for i, b := range part {
				c := newCell(s)
				if err := decodeRawHash(&d, c, raws[i].Val()); err != nil {
					return err
				}
				for di, fi := range distIdx {
					c.f[fi].dcount, c.f[fi].dset = pcs[di*len(part)+i].Val(), true
				}
				bs[i] = loadedBucket{level: b.level, member: b.mem, c: c}
			}
			return nil
		}
		// Each bucket is rendered as soon as it is decoded (overlapping the
		// next page's read), so one cell serves the whole page.
		c := newCell(s)
		rd := renderer{s: s}
		for i, b := range part {
			c.n = 0
			clear(c.f)
			if err := decodeRawHash(&d, c, raws[i].Val()); err != nil {
				return err
			}
			for di, fi := range distIdx {
				c.f[fi].dcount, c.f[fi].dset = pcs[di*len(part)+i].Val(), true
			}
			bs[i] = loadedBucket{level: b.level, member: b.mem, out: rd.render(c)}
		}
		rd.flush()
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
		for pi := range nPages {
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
		out.buckets = buckets
		return out, nil
	}
	for _, a := range aggs {
		out.agg.merge(s, a)
	}
	if err := r.distinctUnion(ctx, k, s, refs, g, out.agg); err != nil {
		return nil, err
	}
	return out, nil
}

// The query cache keeps decoded buckets between queries, and Redis tells
// it when one changes: its reads go through a connection of its own with
// CLIENT TRACKING on, so Redis sends that connection an "invalidate"
// message for every key it read once any client modifies the key (the
// engine's scripts, other processes, older binaries, DEL, FLUSHDB,
// expiry, eviction). Redis queues the message before the modifying
// command's reply, hence before the reply to any command sent after it;
// each query starts with a round trip on that connection, which handles
// the messages queued before it, so a write that completed before a query
// began is always seen. A bucket read while a message for it arrives is
// not kept. Should the connection fail or tracking be off (a new
// connection), the cache is emptied and tracking turned on again; a client
// that cannot track (a Cluster, RESP2, Redis before 6.2, a proxy) simply
// reads every query.
//
// The connection belongs to a client of the cache's own, made from the
// state's client's options (one connection, so that the messages reach
// only the cache); it is closed when the state is garbage collected. One
// query at a time uses it; a concurrent query reads without the cache.
// Queries of single buckets' distinct counts (SCARD or PFCOUNT; Redis does
// not track PFCOUNT) and queries over more buckets than the cache holds are not
// cached. Redis tracks key names across databases, so a change to the same
// name in another database, or a FLUSHDB of any, also empties entries:
// more reads, never a stale one.

// queryCacheMax is how many buckets the cache of a state root holds.
const queryCacheMax = 1 << 17

// queryCacheFill is how many buckets the cache reads per round trip.
const queryCacheFill = 4096

// queryCacheRetry is how long the cache stays off after its connection
// failed.
const queryCacheRetry = time.Second

// errNoCache: the query cannot use the cache; read without it.
var errNoCache = errors.New("projection: query cache unavailable")

// queryCache is the cache of one RedisState root (and its prefixed views).
type queryCache struct {
	base *redis.Client // the state's
	// mu is held by the query using the connection; the invalidation
	// handler runs inside those uses, under mu too.
	mu      sync.Mutex
	own     *redis.Client // nil until used
	conn    *redis.Conn   // nil until used, and after a failure
	retryAt time.Time
	off     bool // the client cannot track
	// cells maps bucket keys to decoded buckets, which are never modified.
	cells map[string]*cell
	// invalidated collects the keys invalidated while a read is in
	// flight, and flushed whether everything was.
	invalidated map[string]struct{}
	flushed     bool
	// filled counts the buckets read through the cache (tests look).
	filled int
	// afterFill, set by tests, runs between reading and keeping buckets.
	afterFill func()
}

// queryCache returns the root's query cache, made on first use; nil when
// the client cannot track (Cluster, RESP2) or the state is closed.
func (r *RedisState) queryCache() *queryCache {
	root := r.root
	root.cacheOnce.Do(func() {
		c, ok := r.rdb.(*redis.Client)
		if !ok || c.Options().Protocol != 3 {
			return
		}
		qc := &queryCache{base: c, cells: map[string]*cell{}}
		root.cache = qc
		// A state dropped without Close still gives its connection back.
		runtime.AddCleanup(root, func(qc *queryCache) { qc.close() }, qc)
	})
	return root.cache
}

// Close releases the connection of the query cache; the client given to
// NewRedisState stays open (it is the caller's). Queries after Close read
// without the cache. It affects every view of the state (WithPrefix).
func (r *RedisState) Close() error {
	root := r.root
	root.cacheOnce.Do(func() {}) // no cache is made after Close
	if root.cache != nil {
		root.cache.close()
	}
	return nil
}

func (c *queryCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset()
	if c.own != nil {
		_ = c.own.Close()
		c.own = nil
	}
	c.off = true
}

// reset closes the connection and empties the cache.
func (c *queryCache) reset() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	clear(c.cells)
	c.retryAt = time.Now().Add(queryCacheRetry)
}

// HandlePushNotification handles the invalidate messages of the tracking
// connection: ["invalidate", [key, ...]], or ["invalidate", nil] when
// everything was (FLUSHDB, FLUSHALL).
func (c *queryCache) HandlePushNotification(_ context.Context, _ push.NotificationHandlerContext, n []any) error {
	if len(n) < 2 {
		return nil
	}
	keys, ok := n[1].([]any)
	if !ok {
		clear(c.cells)
		c.flushed = true
		return nil
	}
	for _, k := range keys {
		key, _ := k.(string)
		delete(c.cells, key)
		if c.invalidated != nil {
			c.invalidated[key] = struct{}{}
		}
	}
	return nil
}

// connect returns the tracking connection, opening it when needed; nil
// when the cache is off.
func (c *queryCache) connect(ctx context.Context) *redis.Conn {
	if c.conn != nil || c.off || time.Now().Before(c.retryAt) {
		return c.conn
	}
	if c.own == nil {
		o := *c.base.Options()
		if o.MaintNotificationsConfig != nil {
			m := *o.MaintNotificationsConfig
			o.MaintNotificationsConfig = &m
		}
		o.PushNotificationProcessor, o.ClientSideCache, o.ClientSideCacheConfig = nil, nil, nil
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = 1, 0, 1, 1
		own := redis.NewClient(&o)
		if err := own.RegisterPushNotificationHandler("invalidate", c, true); err != nil {
			_ = own.Close()
			c.off = true
			return nil
		}
		c.own = own
	}
	c.conn = c.own.Conn()
	clear(c.cells)
	if err := c.track(ctx); err != nil {
		c.fail(err)
		return nil
	}
	return c.conn
}

// track turns tracking on for the connection and checks that it is.
func (c *queryCache) track(ctx context.Context) error {
	pipe := c.conn.Pipeline()
	on := pipe.Do(ctx, "client", "tracking", "on")
	info := redis.NewRawCmd(ctx, "client", "trackinginfo")
	_ = pipe.Process(ctx, info)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	if err := on.Err(); err != nil {
		return err
	}
	if !trackingOn(info.Val()) {
		return errNoCache
	}
	return nil
}

// fail handles an error of the tracking connection: a reply of Redis
// refusing to track turns the cache off for good, anything else for a
// while.
func (c *queryCache) fail(err error) {
	var re redis.Error
	if errors.As(err, &re) || errors.Is(err, errNoCache) {
		c.off = true
	}
	c.reset()
}

// trackingOn reports whether a RESP3 reply to CLIENT TRACKINGINFO has the
// flag "on".
func trackingOn(raw []byte) bool {
	typ, n, p, err := respLine(raw, 0)
	if err != nil || typ != '%' {
		return false
	}
	for i := 0; i < n; i++ {
		var key []byte
		if key, p, err = respString(raw, p); err != nil {
			return false
		}
		if string(key) != "flags" {
			if p, err = respSkip(raw, p); err != nil {
				return false
			}
			continue
		}
		typ, m, q, err := respLine(raw, p)
		if err != nil || (typ != '~' && typ != '*') {
			return false
		}
		for j := 0; j < m; j++ {
			var flag []byte
			if flag, q, err = respString(raw, q); err != nil {
				return false
			}
			if string(flag) == "on" {
				return true
			}
		}
		return false
	}
	return false
}

// load is RedisState.load through the cache. ok is false when the query
// must read without it.
func (c *queryCache) load(ctx context.Context, r *RedisState, key string, s *schema, version int, plan func(stateMeta) []planRange,
	aggregate bool, f *groupFilter) (ld *loaded, meta stateMeta, err error, ok bool) {
	conn := c.connect(ctx)
	if conn == nil {
		return nil, stateMeta{}, nil, false
	}
	// The first round trip of every query checks that tracking is on; the
	// messages before its replies are handled as they are read.
	first := func(pipe redis.Pipeliner) func() error {
		info := redis.NewRawCmd(ctx, "client", "trackinginfo")
		_ = pipe.Process(ctx, info)
		return func() error {
			if trackingOn(info.Val()) {
				return nil
			}
			// A new connection: what was read before is not tracked.
			clear(c.cells)
			if err := c.track(ctx); err != nil {
				c.fail(err)
				return errNoCache
			}
			return nil
		}
	}
	ld, meta, err = r.loadRounds(ctx, key, s, version, plan, conn.Pipeline, first,
		func(k rkeys, raw []string, p []planRange, zs []*redis.StringSliceCmd) (*loaded, error) {
			return c.loadPlan(ctx, r, conn, k, s, raw, p, zs, aggregate, f)
		})
	var re redis.Error
	switch {
	case err == nil, errors.As(err, &re), errors.Is(err, errStale), errors.As(err, new(*errVersion)), errors.Is(err, ErrConfigChanged):
		return ld, meta, err, true
	case errors.Is(err, errNoCache):
		return nil, stateMeta{}, nil, false
	}
	// The connection failed (or the query was cancelled mid-read).
	c.fail(err)
	return nil, stateMeta{}, nil, false
}

// loadPlan is RedisState.loadPlan through the cache: the buckets it holds,
// the others read on its connection (so that Redis tracks them) and kept.
func (c *queryCache) loadPlan(ctx context.Context, r *RedisState, conn *redis.Conn, k rkeys, s *schema, raw []string, p []planRange,
	zs []*redis.StringSliceCmd, aggregate bool, f *groupFilter) (*loaded, error) {
	out := &loaded{}
	if aggregate {
		out.agg = newCell(s)
	}
	if len(p) == 0 {
		return out, nil
	}
	if zs == nil {
		pipe := conn.Pipeline()
		zs = r.queueMembers(ctx, pipe, k, s, p)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	refs := refsOf(s, p, zs, f)
	out.rollups = readsRollups(refs)
	if len(refs) > queryCacheMax {
		return nil, errNoCache
	}
	g := newMetaGuard(ctx, k, s, raw)
	cells := make([]*cell, len(refs))
	var miss []int
	var kb []byte
	for i, b := range refs {
		kb = appendSparseKey(kb[:0], k.base, s.levels[b.level], b.mem)
		if cl, ok := c.cells[string(kb)]; ok {
			cells[i] = cl
		} else {
			miss = append(miss, i)
		}
	}
	for len(miss) > 0 {
		part := miss[:min(len(miss), queryCacheFill)]
		miss = miss[len(part):]
		if err := c.fill(ctx, conn, k, s, g, refs, part, cells); err != nil {
			return nil, err
		}
	}
	switch {
	case aggregate:
		for _, cl := range cells {
			out.agg.merge(s, cl)
		}
		if err := r.distinctUnion(ctx, k, s, refs, g, out.agg); err != nil {
			return nil, err
		}
	case s.flat():
		out.buckets = make([]loadedBucket, len(refs))
		for i, b := range refs {
			out.buckets[i] = loadedBucket{level: b.level, member: b.mem, c: cells[i]}
		}
	default:
		out.buckets = make([]loadedBucket, len(refs))
		rd := renderer{s: s}
		for i, b := range refs {
			out.buckets[i] = loadedBucket{level: b.level, member: b.mem, out: rd.render(cells[i])}
		}
		rd.flush()
	}
	return out, nil
}

// fill reads the buckets miss (indexes into refs) on the tracking
// connection into cells and keeps those no message invalidated meanwhile.
func (c *queryCache) fill(ctx context.Context, conn *redis.Conn, k rkeys, s *schema, g *metaGuard, refs []bucketRef, miss []int, cells []*cell) error {
	part := make([]bucketRef, len(miss))
	for j, i := range miss {
		part[j] = refs[i]
	}
	args := keyArgs("hgetall", k.base, s, part)
	raws := make([]redis.RawCmd, len(miss))
	cmds := make([]redis.Cmder, 0, len(miss)+2)
	before, after := g.check(), g.check()
	cmds = append(cmds, before)
	for j := range miss {
		raws[j] = *redis.NewRawCmd(ctx, args[2*j:2*j+2:2*j+2]...)
		cmds = append(cmds, &raws[j])
	}
	cmds = append(cmds, after)
	c.invalidated, c.flushed = map[string]struct{}{}, false
	defer func() { c.invalidated, c.flushed = nil, false }()
	pipe := conn.Pipeline()
	_ = pipe.BatchProcess(ctx, cmds...)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	if err := g.checked(before); err != nil {
		return err
	}
	if err := g.checked(after); err != nil {
		return err
	}
	c.filled += len(miss)
	if c.afterFill != nil {
		c.afterFill()
	}
	slab := make([]cell, len(miss))
	fcs := make([]fieldCell, len(miss)*len(s.fields))
	d := hashDecoder{s: s, names: fieldNames(s)}
	for j, i := range miss {
		cl := &slab[j]
		cl.f = fcs[j*len(s.fields) : (j+1)*len(s.fields) : (j+1)*len(s.fields)]
		if err := decodeRawHash(&d, cl, raws[j].Val()); err != nil {
			return err
		}
		cells[i] = cl
		if c.flushed {
			continue
		}
		key := *args[2*j+1].(*string)
		if _, gone := c.invalidated[key]; !gone {
			c.keep(key, cl)
		}
	}
	return nil
}

// keep adds a bucket, first dropping a quarter of the cache when it is
// full.
func (c *queryCache) keep(key string, cl *cell) {
	if len(c.cells) >= queryCacheMax {
		n := 0
		for k := range c.cells { // in no particular order
			delete(c.cells, k)
			if n++; n >= queryCacheMax/4 {
				break
			}
		}
	}
	c.cells[key] = cl
}
