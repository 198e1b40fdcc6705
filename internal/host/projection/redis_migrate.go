package projection

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Migrations of the Redis state between formats 1 and 2, under a
// per-projection lock that writers wait on.

const (
	redisLockTTL       = 2 * time.Minute
	redisMigrateChunk  = 256
	redisCleanupChunks = 500
)

func (r *RedisState) migrate(ctx context.Context, key string, s *schema, from, to int, hooks migrateHooks) (int, error) {
	if err := r.ensureScripts(ctx, false); err != nil {
		return 0, err
	}
	k := r.keys(key)
	var tb [12]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	ok, err := r.rdb.SetNX(ctx, k.lock(), token, redisLockTTL).Result()
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errBusy
	}
	defer unlockScript.Run(context.WithoutCancel(ctx), r.rdb, []string{k.lock()}, token)
	meta, _, err := r.readMeta(ctx, k, s)
	if err != nil {
		return 0, err
	}
	if meta.version != from {
		return 0, errNoMigration
	}
	if err := checkFingerprint(s, meta.fingerprint); err != nil {
		return 0, err
	}
	if hooks.started != nil {
		hooks.started()
	}
	step := 0
	next := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if hooks.step != nil {
			if err := hooks.step(step); err != nil {
				return err
			}
		}
		step++
		return renewScript.Run(ctx, r.rdb, []string{k.lock()}, token, redisLockTTL.Milliseconds()).Err()
	}
	if from == 1 && to == 2 {
		return r.migrateToSparse(ctx, k, s, token, next)
	}
	if from == 2 && to == 1 {
		return r.migrateToBlob(ctx, k, s, meta, token, next)
	}
	return 0, fmt.Errorf("projection: no migration from storage version %d to %d", from, to)
}

// migrateToSparse copies the blob into per-bucket keys, then switches.
func (r *RedisState) migrateToSparse(ctx context.Context, k rkeys, s *schema, token string, next func() error) (int, error) {
	raw, err := r.rdb.Get(ctx, k.base).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	m := newModel(s)
	if err == nil {
		if m, _, err = decodeBlob(s, raw); err != nil {
			return 0, err
		}
	}
	// Remove what an interrupted earlier attempt may have left.
	if err := r.deleteSparse(ctx, k, s); err != nil {
		return 0, err
	}
	n, err := r.writeSparse(ctx, k, s, m, next)
	if err == nil {
		err = next()
	}
	if err == nil {
		args := []any{token, "2", ""}
		args = append(args, "through", m.through, "fp", s.fingerprint)
		for j, w := range s.levels {
			args = append(args, "wm:"+string(w), fmtWatermark(m.wm[j]), "del:"+string(w), fmtWatermark(m.del[j]))
		}
		var ok int64
		ok, err = flipScript.Run(ctx, r.rdb, []string{k.meta(), k.lock(), k.base}, args...).Int64()
		if err == nil && ok != 1 {
			err = errors.New("projection: migration lock lost before the switch")
		}
	}
	if err != nil {
		// Roll back: the blob is untouched; remove the partial copy.
		if cerr := r.deleteSparse(context.WithoutCancel(ctx), k, s); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
		return 0, err
	}
	return n, nil
}

func fmtWatermark(v int64) string {
	if v == noTime {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// writeSparse writes every bucket of m as format-2 keys.
func (r *RedisState) writeSparse(ctx context.Context, k rkeys, s *schema, m *model, next func() error) (int, error) {
	n := 0
	pipe := r.rdb.Pipeline()
	flush := func() error {
		if pipe.Len() == 0 {
			return nil
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		return next()
	}
	for j, l := range m.levels {
		w := s.levels[j]
		for _, sc := range l.scores {
			for _, mem := range l.at[sc] {
				c := l.m[mem].c
				fields := []any{"n", c.n}
				for i := range s.fields {
					fs, fc := &s.fields[i], &c.f[i]
					if fc.cnt > 0 {
						fields = append(fields, "c|"+fs.name, fc.cnt)
						if fs.sum {
							scale := strconv.Itoa(int(fc.sum.scale))
							for li, lv := range fc.sum.limbs() {
								if lv != 0 {
									fields = append(fields, "s|"+fs.name+"|"+scale+"|"+strconv.Itoa(li), lv)
								}
							}
						}
						if fs.minmax {
							fields = append(fields, "lo|"+fs.name, fc.lo.String(), "hi|"+fs.name, fc.hi.String())
						}
					}
					if len(fc.vals) > 0 {
						pipe.SAdd(ctx, k.distinct(fs.name, w, mem), slices.Collect(anyKeys(fc.vals))...)
					}
					if fc.hll != nil && !fc.hll.Empty() {
						pipe.Set(ctx, k.distinct(fs.name, w, mem), fc.hll.Redis(), 0)
					}
				}
				pipe.HSet(ctx, k.bucket(w, mem), fields...)
				pipe.ZAdd(ctx, k.index(w), redis.Z{Score: float64(sc), Member: mem})
				n++
				if n%redisMigrateChunk == 0 {
					if err := flush(); err != nil {
						return n, err
					}
				}
			}
		}
	}
	return n, flush()
}

// deleteSparse removes every format-2 key of the projection's levels,
// sketches of buckets not sealed yet included.
func (r *RedisState) deleteSparse(ctx context.Context, k rkeys, s *schema) error {
	if err := r.deleteMatching(ctx, globEscape(k.base)+":dist:*"); err != nil {
		return err
	}
	dist, _ := distinctFields(s)
	for _, w := range s.levels {
		for {
			mems, err := r.rdb.ZRange(ctx, k.index(w), 0, redisCleanupChunks-1).Result()
			if err != nil {
				return err
			}
			if len(mems) == 0 {
				break
			}
			pipe := r.rdb.Pipeline()
			for _, mem := range mems {
				pipe.Del(ctx, k.bucket(w, mem))
				for _, d := range dist {
					pipe.Del(ctx, k.distinct(d, w, mem))
				}
			}
			zm := make([]any, len(mems))
			for i, mem := range mems {
				zm[i] = mem
			}
			pipe.ZRem(ctx, k.index(w), zm...)
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// migrateToBlob reads every bucket into a model, then writes the blob and
// switches in one step, then removes the per-bucket keys.
func (r *RedisState) migrateToBlob(ctx context.Context, k rkeys, s *schema, meta stateMeta, token string, next func() error) (int, error) {
	m := newModel(s)
	copy(m.wm, meta.wm)
	copy(m.del, meta.del)
	m.through = meta.through
	names := fieldNames(s)
	dist, distIdx := distinctFields(s)
	n := 0
	for j, w := range s.levels {
		zs, err := r.rdb.ZRangeWithScores(ctx, k.index(w), 0, -1).Result()
		if err != nil {
			return 0, err
		}
		for i := 0; i < len(zs); i += redisMigrateChunk {
			chunk := zs[i:min(i+redisMigrateChunk, len(zs))]
			pipe := r.rdb.Pipeline()
			hs := make([]*redis.MapStringStringCmd, len(chunk))
			hl := make([][]distinctRead, len(chunk))
			for ci, z := range chunk {
				mem := z.Member.(string)
				hs[ci] = pipe.HGetAll(ctx, k.bucket(w, mem))
				for _, d := range dist {
					hl[ci] = append(hl[ci], queueDistinct(ctx, pipe, k, d, j, w, mem))
				}
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return 0, err
			}
			for ci, z := range chunk {
				mem := z.Member.(string)
				flat := make([]any, 0, 2*len(hs[ci].Val()))
				for f, v := range hs[ci].Val() {
					flat = append(flat, f, v)
				}
				c, err := cellFromHash(s, flat, names)
				if err != nil {
					return 0, err
				}
				if j > 0 {
					c.markRollup()
				}
				for di, rd := range hl[ci] {
					if err := rd.into(&c.f[distIdx[di]]); err != nil {
						return 0, err
					}
				}
				e := m.levels[j].get(s, mem, int64(z.Score))
				e.c = c
				n++
			}
			if err := next(); err != nil {
				return 0, err
			}
		}
	}
	blob, err := encodeBlob(s, m)
	if err != nil {
		return 0, err
	}
	args := []any{token, "1", string(blob), "through", "", "fp", s.fingerprint}
	for _, w := range s.levels {
		args = append(args, "wm:"+string(w), "", "del:"+string(w), "")
	}
	ok, err := flipScript.Run(ctx, r.rdb, []string{k.meta(), k.lock(), k.base}, args...).Int64()
	if err != nil {
		return 0, err
	}
	if ok != 1 {
		return 0, errors.New("projection: migration lock lost before the switch")
	}
	// The blob is active; the per-bucket keys are now unused. A failure to
	// remove them is not a failed migration: the next migration to format
	// 2 removes leftovers before it copies.
	_ = r.deleteSparse(context.WithoutCancel(ctx), k, s)
	return n, nil
}
