package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/factline/factline/internal/gather"
)

// maxBatch bounds how many exact decisions one Redis round trip carries.
const maxBatch = 128

// batchReq is one exact decision waiting for its round trip.
type batchReq struct {
	key string
	rpm int
	res scriptResult
	err error
}

// newBatcher gathers the exact decisions (one script call each) that
// arrive while a round trip is in flight and sends them together, as one
// pipeline: under concurrent load many requests share one round trip,
// while a lone request goes out at once, as a plain EVALSHA.
func (r *Redis) newBatcher() *gather.Gatherer[*batchReq] {
	return gather.New(gather.Config[*batchReq]{Flights: 1, Max: maxBatch}, r.flush)
}

// decide runs the script for one request of key, batched with the
// requests of other keys that arrive meanwhile.
func (r *Redis) decide(ctx context.Context, key string, rpm int) (scriptResult, error) {
	req := &batchReq{key: key, rpm: rpm}
	if err := r.batch.Do(ctx, req); err != nil {
		return scriptResult{}, err
	}
	return req.res, req.err
}

// flush decides batch in one round trip, within the call timeout and
// unless the breaker is open; a failed round trip fails every request of
// the batch and counts once for the breaker.
func (r *Redis) flush(batch []*batchReq) {
	if len(batch) == 1 {
		batch[0].res, batch[0].err = r.script(context.Background(), batch[0].key, batch[0].rpm, 1)
		return
	}
	_, err := r.breaker.Execute(func() (scriptResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		lost, err := r.pipeline(ctx, batch)
		if err == nil && len(lost) > 0 {
			// The server lost its script cache: load it and retry once,
			// only the requests it did not run (the others were decided).
			if err = gcraScript.Load(ctx, r.client).Err(); err == nil {
				lost, err = r.pipeline(ctx, lost)
			}
			if err == nil && len(lost) > 0 {
				err = fmt.Errorf("ratelimit: script missing after loading it")
			}
		}
		return scriptResult{}, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		err = errBreakerOpen
	}
	if err != nil {
		for _, req := range batch {
			req.err = err
		}
	}
}

// pipeline sends one EVALSHA per request in one round trip and fills in
// the results; lost are the requests the server had no script for.
func (r *Redis) pipeline(ctx context.Context, batch []*batchReq) (lost []*batchReq, err error) {
	now := ""
	if r.clk != nil {
		now = strconv.FormatInt(r.clk.Now().UnixMicro(), 10)
	}
	pipe := r.client.Pipeline()
	cmds := make([]interface{ Int64Slice() ([]int64, error) }, len(batch))
	for i, req := range batch {
		cmds[i] = gcraScript.EvalSha(ctx, pipe, []string{req.key}, req.rpm, interval(req.rpm), now, 1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isReplyError(err) {
		return nil, fmt.Errorf("ratelimit: pipeline of %d: %w", len(batch), err)
	}
	for i, req := range batch {
		res, err := cmds[i].Int64Slice()
		switch {
		case err != nil && isNoScript(err):
			lost = append(lost, req)
		case err != nil:
			req.err = err
		case len(res) != 4 || res[0] < 0 || res[0] > 1:
			req.err = fmt.Errorf("ratelimit: script returned %v, want 4 values admitting 0..1", res)
		default:
			req.res = scriptResult{admitted: int(res[0]), remaining: int(res[1]), retryAfter: res[2], resetAfter: res[3]}
		}
	}
	return lost, nil
}

func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }

// isReplyError reports whether err is an error reply of the server (for
// one command), as opposed to a failed round trip.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
