package projection

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Format 1 in Redis: the blob, updated with optimistic transactions
// (WATCH, then MULTI/EXEC) that rewrite it whole.

const blobRetries = 1000

func (r *RedisState) applyBlob(ctx context.Context, key string, s *schema, deltas []*factDelta, maxID, atLeast string) (int, error) {
	k := r.keys(key)
	applied := 0
	err := r.blobTx(ctx, k, s, true, func(tx *redis.Tx, m *model) (bool, []func(redis.Pipeliner), error) {
		applied = 0
		if atLeast != "" && m.through < atLeast {
			return false, nil, ErrStateBehind
		}
		// Which facts are new?
		days := map[string][]*factDelta{}
		var order []string
		for _, d := range deltas {
			day := dayOf(d.ts)
			if _, ok := days[day]; !ok {
				order = append(order, day)
			}
			days[day] = append(days[day], d)
		}
		pipe := tx.Pipeline()
		checks := make([]*redis.BoolSliceCmd, len(order))
		for i, day := range order {
			ids := make([]any, len(days[day]))
			for j, d := range days[day] {
				ids[j] = d.id
			}
			checks[i] = pipe.SMIsMember(ctx, k.seen(day), ids...)
		}
		if len(order) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return false, nil, err
			}
		}
		var writes []func(redis.Pipeliner)
		local := map[string]bool{}
		for i, day := range order {
			seen := checks[i].Val()
			var newIDs []any
			for j, d := range days[day] {
				if seen[j] || local[d.id] {
					continue
				}
				local[d.id] = true
				m.apply(s, d)
				applied++
				newIDs = append(newIDs, d.id)
			}
			if len(newIDs) > 0 {
				seenKey := k.seen(day)
				writes = append(writes, func(p redis.Pipeliner) { p.SAdd(ctx, seenKey, newIDs...) })
			}
		}
		changed := applied > 0
		if maxID > m.through {
			m.through = maxID
			changed = true
		}
		if changed {
			// The meta carries factsThroughId too, so that it reads
			// without the blob (Engine.FactsThroughID).
			metaKey, through := k.meta(), m.through
			writes = append(writes, func(p redis.Pipeliner) { p.HSet(ctx, metaKey, "through", through) })
		}
		return changed, writes, nil
	})
	if err != nil {
		return 0, err
	}
	return applied, nil
}

func (r *RedisState) rollupBlob(ctx context.Context, key string, s *schema, now int64) (rollupStats, error) {
	k := r.keys(key)
	var st rollupStats
	err := r.blobTx(ctx, k, s, false, func(_ *redis.Tx, m *model) (bool, []func(redis.Pipeliner), error) {
		before := append(append([]int64(nil), m.wm...), m.del...)
		st = m.rollup(s, now)
		after := append(append([]int64(nil), m.wm...), m.del...)
		return fmt.Sprint(before) != fmt.Sprint(after), nil, nil
	})
	if errors.Is(err, errNothingStored) {
		return rollupStats{}, nil
	}
	return st, err
}

// blobTx runs fn on the decoded blob inside WATCH and writes the blob
// back (with the extra writes) in MULTI/EXEC when fn reports a change,
// retrying on conflicts.
func (r *RedisState) blobTx(ctx context.Context, k rkeys, s *schema, create bool,
	fn func(tx *redis.Tx, m *model) (bool, []func(redis.Pipeliner), error)) error {
	txf := func(tx *redis.Tx) error {
		pipe := tx.Pipeline()
		lockC := pipe.Exists(ctx, k.lock())
		metaC := pipe.HMGet(ctx, k.meta(), "version", "fp")
		blobC := pipe.Get(ctx, k.base)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if lockC.Val() == 1 {
			return errBusy
		}
		mv := metaC.Val()
		version, _ := mv[0].(string)
		fp, _ := mv[1].(string)
		raw, berr := blobC.Bytes()
		switch {
		case version == "" && berr == nil:
			// A blob without meta: version 1, written before meta existed.
		case version == "":
			v, err := r.detectVersion(ctx, k)
			if err != nil {
				return err
			}
			if v == 2 {
				return &errVersion{stored: 2}
			}
			if !create {
				return errNothingStored
			}
		case version != "1":
			v, _ := strconv.Atoi(version)
			return &errVersion{stored: v}
		}
		if err := checkFingerprint(s, fp); err != nil {
			return err
		}
		var m *model
		if berr == nil {
			var err error
			if m, _, err = decodeBlob(s, raw); err != nil {
				return err
			}
		} else if errors.Is(berr, redis.Nil) {
			if !create {
				return errNothingStored
			}
			m = newModel(s)
		} else {
			return berr
		}
		changed, writes, err := fn(tx, m)
		if err != nil || !changed {
			return err
		}
		blob, err := encodeBlob(s, m)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k.base, blob, 0)
			p.HSet(ctx, k.meta(), "version", "1", "fp", s.fingerprint)
			for _, w := range writes {
				w(p)
			}
			return nil
		})
		return err
	}
	backoff := time.Millisecond
	for i := 0; i < blobRetries; i++ {
		err := r.rdb.Watch(ctx, txf, k.meta(), k.lock(), k.base)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
	return errors.New("projection: too many conflicting updates of the blob")
}

func (r *RedisState) loadBlob(ctx context.Context, key string, s *schema, plan func(stateMeta) []planRange, aggregate bool, f *groupFilter) (*loaded, stateMeta, error) {
	k := r.keys(key)
	pipe := r.rdb.Pipeline()
	metaC := pipe.HMGet(ctx, k.meta(), "version", "fp")
	blobC := pipe.Get(ctx, k.base)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, stateMeta{}, err
	}
	mv := metaC.Val()
	if v, _ := mv[0].(string); v != "" && v != "1" {
		n, _ := strconv.Atoi(v)
		return nil, stateMeta{}, &errVersion{stored: n}
	}
	raw, err := blobC.Bytes()
	if errors.Is(err, redis.Nil) {
		v, err := r.detectVersion(ctx, k)
		if err != nil {
			return nil, stateMeta{}, err
		}
		if v == 2 {
			return nil, stateMeta{}, &errVersion{stored: 2}
		}
		meta := emptyMeta(s)
		plan(meta)
		return &loaded{}, meta, nil
	}
	if err != nil {
		return nil, stateMeta{}, err
	}
	m, fp, err := decodeBlob(s, raw)
	if err != nil {
		return nil, stateMeta{}, err
	}
	meta := stateMeta{version: 1, fingerprint: fp, wm: m.wm, del: m.del, through: m.through}
	return m.load(s, plan(meta), aggregate, f), meta, nil
}
