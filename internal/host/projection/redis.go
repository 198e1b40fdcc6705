package projection

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/gather"
)

// RedisState keeps projections in Redis (see redis_lua.go for the key
// layout). Format 2 updates run as Lua scripts: one fact's dedupe record
// and the update of every bucket and rollup level it touches happen in one
// atomic step (a script call covers up to 128 facts, each applied whole
// or not at all with its dedupe record), and many calls travel in one
// pipeline, shared with the calls of other projections applying at the
// same time (see newSender). Queries read the buckets of their plan in pages, two at a
// time. Format 1 (one blob) updates are optimistic transactions
// (WATCH/MULTI) that rewrite the blob.
//
// It takes a standalone Redis or a Redis Cluster, Redis 5 or later. On a
// Cluster (a *redis.ClusterClient) every key of one projection key shares
// the hash tag {key} (see clusterBase), so each script and transaction
// touches one slot while different projections spread over the slots;
// deleting by pattern scans every master.
//
// Materialized queries keep decoded buckets in process and read again only
// those Redis reports changed: with a RESP3 *redis.Client on Redis 6.2 or
// later, the state opens one more connection with CLIENT TRACKING on, so
// writes by any client invalidate the cache (see docs/decisions.md). Close
// releases that connection.
type RedisState struct {
	rdb    redis.UniversalClient
	prefix string
	root   *redisRoot
}

var _ CachedState = (*RedisState)(nil)

type redisRoot struct {
	id     string
	mu     sync.Mutex
	loaded bool
	// cluster: the client is a Redis Cluster's, so keys carry hash tags.
	cluster bool
	// cache is the query cache (see redis_query.go), made once on first
	// use; nil when the client cannot track.
	cacheOnce sync.Once
	cache     *queryCache
	// beforeSeal, set by tests, runs between reading a level's children
	// and sealing them.
	beforeSeal func()
	// sender shares round trips among concurrent applies (see newSender).
	sender *gather.Gatherer[*sendReq]
}

// NewRedisState returns a state on a go-redis client.
func NewRedisState(rdb redis.UniversalClient) *RedisState {
	var b [8]byte
	_, _ = rand.Read(b[:])
	_, cluster := rdb.(*redis.ClusterClient)
	r := &RedisState{rdb: rdb, root: &redisRoot{id: "redis" + hex.EncodeToString(b[:]), cluster: cluster}}
	r.root.sender = r.newSender(sendFlights)
	return r
}

// WithPrefix returns a view of the same state whose keys all start with
// the prefix (added to the current one), for example "factline:proj:" +
// tenant + ":" + projection id + ":".
func (r *RedisState) WithPrefix(prefix string) *RedisState {
	return &RedisState{rdb: r.rdb, prefix: r.prefix + prefix, root: r.root}
}

func (r *RedisState) id() string { return r.root.id + "\x00" + r.prefix }

type rkeys struct{ base string }

func (r *RedisState) keys(key string) rkeys {
	if r.root.cluster {
		return rkeys{base: clusterBase(r.prefix, key)}
	}
	return rkeys{base: r.prefix + key}
}

// clusterBase is the base of a projection key's keys on a Redis Cluster:
// the key as a hash tag, prefix{key}, so that all of them (which the
// scripts derive from the base) hash to one slot, a slot per projection.
// A prefix that holds a hash tag of its own keeps it (one slot for the
// whole prefix, as the operator chose).
func clusterBase(prefix, key string) string {
	if hashTag(prefix) != "" {
		return prefix + key
	}
	if key == "" || key[0] == '}' {
		key = "_" + key // "{}" is no hash tag
	}
	return prefix + "{" + key + "}"
}

// hashTag returns the hash tag of a Redis Cluster key: what lies between
// the first '{' and the next '}', when not empty.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

func (k rkeys) meta() string                       { return k.base + ":meta" }
func (k rkeys) lock() string                       { return k.base + ":lock" }
func (k rkeys) index(w Window) string              { return k.base + ":index:" + string(w) }
func (k rkeys) bucket(w Window, mem string) string { return sparseKey(k.base, w, mem) }
func (k rkeys) seen(day string) string             { return k.base + ":seen:" + day }

// distinct is the key of a bucket's distinct values: a set of the values
// in a base bucket, a HyperLogLog in a rollup bucket.
func (k rkeys) distinct(field string, w Window, mem string) string {
	return sparseKey(k.distinctBase(field), w, mem)
}

func (k rkeys) distinctBase(field string) string { return k.base + ":dist:" + field }

// ensureScripts loads the scripts so that pipelines can use EVALSHA.
func (r *RedisState) ensureScripts(ctx context.Context, force bool) error {
	r.root.mu.Lock()
	defer r.root.mu.Unlock()
	if r.root.loaded && !force {
		return nil
	}
	for _, s := range allScripts {
		if err := s.Load(ctx, r.rdb).Err(); err != nil {
			return fmt.Errorf("projection: load Redis scripts: %w", err)
		}
	}
	r.root.loaded = true
	return nil
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// run runs one script, reloading scripts after a NOSCRIPT.
func (r *RedisState) run(ctx context.Context, s *redis.Script, keys []string, args ...any) ([]any, error) {
	if err := r.ensureScripts(ctx, false); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		res, err := s.EvalSha(ctx, r.rdb, keys, args...).Slice()
		if !isNoScript(err) || attempt == 3 {
			return res, err
		}
		// Redis lost its scripts (a restart, SCRIPT FLUSH): load them again.
		if err := r.ensureScripts(ctx, true); err != nil {
			return nil, err
		}
	}
}

// scriptStatus maps the error replies of the scripts.
func scriptStatus(res []any) error {
	if len(res) == 0 {
		return errors.New("projection: empty script reply")
	}
	code, ok := res[0].(int64)
	if !ok || code >= 0 {
		return nil
	}
	switch code {
	case -1:
		return errBusy
	case -2:
		v, _ := res[1].(int64)
		return &errVersion{stored: int(v)}
	case -3:
		fp, _ := res[1].(string)
		return fmt.Errorf("%w (stored %s)", ErrConfigChanged, fp)
	case -4:
		return errNothingStored
	case -9:
		return ErrStateBehind
	}
	return fmt.Errorf("projection: script status %d", code)
}

var errNothingStored = errors.New("projection: nothing stored")

// StorageVersion implements CachedState.
func (r *RedisState) StorageVersion(ctx context.Context, key string) (int, error) {
	k := r.keys(key)
	return r.detectVersion(ctx, k)
}

func (r *RedisState) detectVersion(ctx context.Context, k rkeys) (int, error) {
	pipe := r.rdb.Pipeline()
	vc := pipe.HGet(ctx, k.meta(), "version")
	bc := pipe.Exists(ctx, k.base)
	var ic []*redis.IntCmd
	for _, w := range append(windowOrder, windowAll) {
		ic = append(ic, pipe.Exists(ctx, k.index(w)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	if v, err := vc.Int(); err == nil {
		return v, nil
	}
	if bc.Val() == 1 {
		return 1, nil
	}
	for _, c := range ic {
		if c.Val() == 1 {
			return 2, nil
		}
	}
	return 0, nil
}

// Keys implements CachedState.
func (r *RedisState) Keys(ctx context.Context, key string) ([]string, error) {
	k := r.keys(key)
	v, err := r.detectVersion(ctx, k)
	if err != nil || v == 0 {
		return nil, err
	}
	if v == 1 {
		return []string{k.base}, nil
	}
	var out []string
	for _, w := range append(windowOrder, windowAll) {
		mems, err := r.rdb.ZRange(ctx, k.index(w), 0, -1).Result()
		if err != nil {
			return nil, err
		}
		for _, mem := range mems {
			out = append(out, k.bucket(w, mem))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Delete implements CachedState.
func (r *RedisState) Delete(ctx context.Context, key string) error {
	k := r.keys(key)
	if err := r.rdb.Del(ctx, k.base).Err(); err != nil {
		return err
	}
	return r.deleteMatching(ctx, globEscape(k.base)+":*")
}

// deleteMatching deletes the keys matching a SCAN pattern; on a Cluster,
// on every master (SCAN sees one node's keys).
func (r *RedisState) deleteMatching(ctx context.Context, pattern string) error {
	if c, ok := r.rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := deleteScanned(ctx, node, pattern, true); err != nil {
				return fmt.Errorf("projection: delete %s on %s: %w", pattern, node.Options().Addr, err)
			}
			return nil
		})
	}
	return deleteScanned(ctx, r.rdb, pattern, false)
}

// deleteScanned deletes the keys matching pattern that a SCAN of c finds.
// A Cluster node (perKey) refuses a DEL of keys in several slots: one
// DEL per key there, pipelined.
func deleteScanned(ctx context.Context, c redis.UniversalClient, pattern string, perKey bool) error {
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	del := func(keys []string) error {
		if !perKey {
			return c.Del(ctx, keys...).Err()
		}
		pipe := c.Pipeline()
		for _, k := range keys {
			pipe.Del(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) >= 500 {
			if err := del(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return del(batch)
	}
	return nil
}

func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *RedisState) meta(ctx context.Context, key string, s *schema) (stateMeta, error) {
	k := r.keys(key)
	m, _, err := r.readMeta(ctx, k, s)
	return m, err
}

// metaFields are the meta hash fields readMeta reads.
func metaFields(s *schema) []string {
	fields := []string{"version", "fp", "through"}
	for _, w := range s.levels {
		fields = append(fields, "wm:"+string(w), "del:"+string(w))
	}
	return fields
}

// readMeta reads version, fingerprint, through and watermarks; raw holds
// the stored strings of metaFields ("" when absent).
func (r *RedisState) readMeta(ctx context.Context, k rkeys, s *schema) (stateMeta, []string, error) {
	vals, err := r.rdb.HMGet(ctx, k.meta(), metaFields(s)...).Result()
	if err != nil {
		return stateMeta{}, nil, err
	}
	return r.parseMeta(ctx, k, s, vals)
}

// parseMeta interprets the values of metaFields.
func (r *RedisState) parseMeta(ctx context.Context, k rkeys, s *schema, vals []any) (stateMeta, []string, error) {
	fields := metaFields(s)
	var err error
	m := emptyMeta(s)
	str := func(i int) string {
		if v, ok := vals[i].(string); ok {
			return v
		}
		return ""
	}
	if v := str(0); v != "" {
		m.version, _ = strconv.Atoi(v)
	} else {
		if m.version, err = r.detectVersion(ctx, k); err != nil {
			return stateMeta{}, nil, err
		}
	}
	m.fingerprint, m.through = str(1), str(2)
	raw := make([]string, len(fields))
	for i := range fields {
		raw[i] = str(i)
	}
	for j := range s.levels {
		w, d := str(3+2*j), str(4+2*j)
		if w != "" {
			m.wm[j], _ = strconv.ParseInt(w, 10, 64)
		}
		if d != "" {
			m.del[j], _ = strconv.ParseInt(d, 10, 64)
		}
	}
	return m, raw, nil
}

// Facts per script call and script calls per pipeline.
const (
	redisFactsPerCall = 128
	redisCallsPerPipe = 32
)

func (r *RedisState) apply(ctx context.Context, key string, s *schema, version int, deltas []*factDelta, maxID, atLeast string) (int, error) {
	if version == 1 {
		return r.applyBlob(ctx, key, s, deltas, maxID, atLeast)
	}
	if err := r.ensureScripts(ctx, false); err != nil {
		return 0, err
	}
	k := r.keys(key)
	keys := []string{k.meta(), k.lock()}
	// Waves run concurrently, so factsThroughId moves in a last call,
	// once every wave has succeeded.
	headFor := func(through string) []any {
		head := []any{k.base, strconv.Itoa(version), s.fingerprint, through, len(s.levels)}
		for _, w := range s.levels {
			head = append(head, string(w))
		}
		// Every call checks it: a call that waited out a Redis restart
		// must not land on a state restored from an older snapshot.
		return append(head, atLeast)
	}
	head := headFor("")
	if len(deltas) <= redisFactsPerCall {
		// One call holds every fact: it moves factsThroughId in the same
		// atomic step, which saves the stream a round trip per batch.
		return r.applyWave(ctx, keys, s, headFor(maxID), [][]*factDelta{deltas})
	}

	// Waves of script calls go out as pipelines, two at a time, so that
	// encoding the next wave overlaps Redis running the current one. Each
	// call is atomic on its own; the order of facts does not matter.
	perWave := redisFactsPerCall * redisCallsPerPipe
	nWaves := max(1, (len(deltas)+perWave-1)/perWave)
	var (
		mu       sync.Mutex
		applied  int
		firstErr error
	)
	runWave := func(w int) {
		part := deltas[min(w*perWave, len(deltas)):min((w+1)*perWave, len(deltas))]
		var chunks [][]*factDelta
		for i := 0; i < len(part) || (i == 0 && len(chunks) == 0); i += redisFactsPerCall {
			chunks = append(chunks, part[i:min(i+redisFactsPerCall, len(part))])
		}
		n, err := r.applyWave(ctx, keys, s, head, chunks)
		mu.Lock()
		defer mu.Unlock()
		applied += n
		firstErr = moreSevere(firstErr, err)
	}
	finish := func() (int, error) {
		if firstErr != nil || maxID == "" {
			return applied, firstErr
		}
		n, err := r.applyCalls(ctx, keys, applyScript, [][]any{encodeApply(s, headFor(maxID), nil)}, nil)
		return applied + n, err
	}
	if nWaves == 1 {
		runWave(0)
		return finish()
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range next {
				runWave(w)
			}
		}()
	}
	for w := 0; w < nWaves; w++ {
		next <- w
	}
	close(next)
	wg.Wait()
	return finish()
}

// applyWave applies chunks of facts: first as per-bucket sums
// (applySumScript), then, for the chunks that script refused, fact by
// fact (applyScript); one pipeline each.
func (r *RedisState) applyWave(ctx context.Context, keys []string, s *schema, head []any, chunks [][]*factDelta) (int, error) {
	sums := make([][]any, len(chunks))
	var slow [][]any
	var sumIdx []int
	for i, c := range chunks {
		if a := encodeSum(s, head, c); a != nil {
			sums[i] = a
			sumIdx = append(sumIdx, i)
		} else {
			slow = append(slow, encodeApply(s, head, c))
		}
	}
	calls := make([][]any, len(sumIdx))
	for i, ci := range sumIdx {
		calls[i] = sums[ci]
	}
	var refused []int
	applied, err := r.applyCalls(ctx, keys, applySumScript, calls, &refused)
	for _, i := range refused {
		slow = append(slow, encodeApply(s, head, chunks[sumIdx[i]]))
	}
	if len(slow) > 0 {
		n, err2 := r.applyCalls(ctx, keys, applyScript, slow, nil)
		applied += n
		err = moreSevere(err, err2)
	}
	return applied, err
}

// applyCalls runs calls of one script in one pipeline, shared with the
// calls of other applies sent meanwhile (see newSender). Calls answered -8
// (applySumScript's refusal) are listed in refused.
func (r *RedisState) applyCalls(ctx context.Context, keys []string, script *redis.Script, calls [][]any, refused *[]int) (int, error) {
	if len(calls) == 0 {
		return 0, nil
	}
	applied := 0
	var firstErr error
	for attempt := 0; ; attempt++ {
		req := &sendReq{keys: keys, script: script, calls: calls}
		if err := r.send(ctx, req); err != nil {
			return 0, err
		}
		noScript := false
		for _, c := range req.cmds {
			noScript = noScript || isNoScript(c.Err())
		}
		if noScript && attempt < 3 {
			if err := r.ensureScripts(ctx, true); err != nil {
				return 0, err
			}
			continue // facts already applied are deduplicated on the retry
		}
		for i, c := range req.cmds {
			res, cerr := c.Slice()
			if cerr != nil {
				firstErr = moreSevere(firstErr, cerr)
				continue
			}
			if code, _ := res[0].(int64); code == -8 && refused != nil {
				*refused = append(*refused, i)
				continue
			}
			if serr := scriptStatus(res); serr != nil {
				firstErr = moreSevere(firstErr, serr)
				continue
			}
			n, _ := res[0].(int64)
			applied += int(n)
		}
		return applied, firstErr
	}
}

// encodeSum encodes a chunk for applySumScript: its ids by day and its
// deltas summed per base bucket. It returns nil when the chunk repeats an
// id (the per-fact path handles repeats).
func encodeSum(s *schema, head []any, chunk []*factDelta) []any {
	if len(chunk) == 0 {
		return nil
	}
	type sumBucket struct {
		mem    string
		start  int64
		n      int64
		inc    map[string]int64
		incOrd []string
		lo, hi []*number
		elems  []map[string]struct{}
		elemOr [][]string
	}
	ids := make(map[string]struct{}, len(chunk))
	var dayOrder []string
	byDay := map[string][]any{}
	var dayCache bucketCache
	dayCache.w = Day
	minTs := chunk[0].ts
	buckets := map[string]*sumBucket{}
	var order []*sumBucket
	for _, d := range chunk {
		if _, dup := ids[d.id]; dup {
			return nil
		}
		ids[d.id] = struct{}{}
		minTs = min(minTs, d.ts)
		_, day := dayCache.lookup(d.ts)
		if _, ok := byDay[day]; !ok {
			dayOrder = append(dayOrder, day)
		}
		byDay[day] = append(byDay[day], d.id)
		b := buckets[d.members[0]]
		if b == nil {
			b = &sumBucket{mem: d.members[0], start: d.scores[0], inc: map[string]int64{},
				lo: make([]*number, len(s.fields)), hi: make([]*number, len(s.fields)),
				elems: make([]map[string]struct{}, len(s.fields)), elemOr: make([][]string, len(s.fields))}
			buckets[b.mem] = b
			order = append(order, b)
		}
		b.n++
		add := func(name string, v int64) {
			if _, ok := b.inc[name]; !ok {
				b.incOrd = append(b.incOrd, name)
			}
			b.inc[name] += v
		}
		for i := range s.fields {
			fs, v := &s.fields[i], &d.vals[i]
			if fs.numeric && v.isNum {
				add(fs.cName, 1)
				if fs.sum && !v.num.isZero() {
					for li, l := range v.num.limbs() {
						if l != 0 {
							add(fs.sumName(v.num.scale, li), l)
						}
					}
				}
				if fs.minmax {
					x := v.num
					if b.lo[i] == nil || cmpNumbers(x, *b.lo[i]) < 0 {
						b.lo[i] = &x
					}
					if b.hi[i] == nil || cmpNumbers(x, *b.hi[i]) > 0 {
						b.hi[i] = &x
					}
				}
			}
			if fs.distinct && v.hasElem {
				if b.elems[i] == nil {
					b.elems[i] = map[string]struct{}{}
				}
				if _, ok := b.elems[i][v.elem]; !ok {
					b.elems[i][v.elem] = struct{}{}
					b.elemOr[i] = append(b.elemOr[i], v.elem)
				}
			}
		}
	}
	args := make([]any, 0, len(head)+4+len(chunk)+len(order)*12)
	args = append(args, head...)
	args = append(args, minTs, len(dayOrder))
	for _, day := range dayOrder {
		args = append(args, day, len(byDay[day]))
		args = append(args, byDay[day]...)
	}
	args = append(args, len(order))
	for _, b := range order {
		args = append(args, b.mem, b.start, b.n, len(b.incOrd))
		for _, name := range b.incOrd {
			args = append(args, name, b.inc[name])
		}
		var lo, hi []any
		var sk []any
		nsk := 0
		for i := range s.fields {
			fs := &s.fields[i]
			if b.lo[i] != nil {
				lo = append(lo, fs.loName, b.lo[i].String())
				hi = append(hi, fs.hiName, b.hi[i].String())
			}
			if len(b.elemOr[i]) > 0 {
				sk = append(sk, fs.name, len(b.elemOr[i]))
				for _, e := range b.elemOr[i] {
					sk = append(sk, e)
				}
				nsk++
			}
		}
		args = append(args, len(lo)/2)
		args = append(args, lo...)
		args = append(args, len(hi)/2)
		args = append(args, hi...)
		args = append(args, nsk)
		args = append(args, sk...)
	}
	return args
}

// moreSevere keeps the error the engine must handle first.
func moreSevere(a, b error) error {
	rank := func(e error) int {
		var ev *errVersion
		switch {
		case e == nil:
			return 0
		case errors.Is(e, errBusy):
			return 1
		case errors.As(e, &ev):
			return 2
		}
		return 3
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// dayOf returns the YYYY-MM-DD of a fact time (the shard of its dedupe
// record).
func dayOf(ts int64) string { return Day.key(Day.start(ts)) }

// encodeApply encodes the arguments of one apply call (see applyScript).
func encodeApply(s *schema, head []any, chunk []*factDelta) []any {
	L := len(s.levels)
	args := make([]any, 0, len(head)+2+2*len(s.fields)+len(chunk)*(4+2*L+3*len(s.fields)))
	args = append(args, head...)
	args = append(args, len(s.fields))
	for i := range s.fields {
		fs := &s.fields[i]
		kinds := ""
		if fs.sum {
			kinds += "s"
		}
		if fs.minmax {
			kinds += "m"
		}
		if fs.distinct {
			kinds += "d"
		}
		args = append(args, fs.name, kinds)
	}
	args = append(args, len(chunk))
	var dayCache bucketCache
	dayCache.w = Day
	prevDay := ""
	prevMem := make([]string, L)
	prevStart := make([]int64, L)
	var flags []byte
	for n, d := range chunk {
		_, day := dayCache.lookup(d.ts)
		if day == prevDay {
			args = append(args, d.id, "", d.ts)
		} else {
			args = append(args, d.id, day, d.ts)
			prevDay = day
		}
		for j, m := range d.members {
			if n > 0 && m == prevMem[j] {
				args = append(args, "%")
			} else {
				args = append(args, m)
				prevMem[j] = m
			}
		}
		for j, sc := range d.scores {
			if n > 0 && sc == prevStart[j] {
				args = append(args, "")
			} else {
				args = append(args, sc)
				prevStart[j] = sc
			}
		}
		flags = flags[:0]
		for i := range s.fields {
			fs, v := &s.fields[i], &d.vals[i]
			c := byte('0')
			if fs.numeric && v.isNum {
				c++
			}
			if fs.distinct && v.hasElem {
				c += 2
			}
			flags = append(flags, c)
		}
		args = append(args, string(flags))
		for i := range s.fields {
			fs, v := &s.fields[i], &d.vals[i]
			if fs.numeric && v.isNum {
				args = append(args, v.num.scale, limbString(v.num))
				if fs.minmax {
					args = append(args, v.num.String())
				}
			}
			if fs.distinct && v.hasElem {
				args = append(args, v.elem)
			}
		}
	}
	return args
}

// limbString renders the limbs of a mantissa for applyScript: the value
// itself when it is below 10^9, else the limbs separated by spaces.
func limbString(n number) any {
	if n.b == nil && n.m > -limbBase && n.m < limbBase {
		return n.m
	}
	ls := n.limbs()
	var b []byte
	for i, l := range ls {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, l, 10)
	}
	if len(b) == 0 {
		return "0"
	}
	return string(b)
}
