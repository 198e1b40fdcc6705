package projection

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/gather"
)

// maxSendCalls bounds the script calls of one shared round trip.
const maxSendCalls = 256

// sendFlights is how many shared round trips are in flight at once. One
// would leave Redis idle while the process writes a pipeline and reads
// its answers, and every apply waiting for the slowest pipeline; with a
// hundred projections on one stream that kept them from keeping up with
// 800 facts/s on two cores.
const sendFlights = 4

// sendReq is the script calls of one apply, waiting for their round trip.
type sendReq struct {
	ctx    context.Context
	keys   []string
	script *redis.Script
	calls  [][]any
	cmds   []*redis.Cmd // filled in by the round trip
}

// newSender gathers the script calls that concurrent applies (the
// projections fed one batch of the stream, each with its own key) send
// while a round trip is in flight, and sends them together as one
// pipeline: a hundred projections then cost Redis and the process a few
// round trips per batch rather than a hundred, each waiting for one of the
// client's pooled connections. A lone apply goes out at once. Each call
// stays atomic on its own and gets its own answer. Up to flights round
// trips run at once, each on a connection of its own.
func (r *RedisState) newSender(flights int) *gather.Gatherer[*sendReq] {
	return gather.New(gather.Config[*sendReq]{
		Flights: flights,
		Max:     maxSendCalls,
		Weight:  func(req *sendReq) int { return len(req.calls) },
	}, r.flush)
}

// send runs req's calls, in a round trip shared with the calls of other
// applies, and fills in req.cmds; it returns early only when ctx ends.
func (r *RedisState) send(ctx context.Context, req *sendReq) error {
	req.ctx = ctx
	if err := r.root.sender.Do(ctx, req); err != nil {
		return err
	}
	if req.cmds == nil {
		return ctx.Err() // left out: ctx ended before the round trip
	}
	return nil
}

// flush sends the calls of batch in one pipeline. Each command keeps its
// own answer or error; the callers read them. The calls of a caller that
// gave up are left out.
func (r *RedisState) flush(batch []*sendReq) {
	var ctx context.Context
	pipe := r.rdb.Pipeline()
	for _, req := range batch {
		if req.ctx.Err() != nil {
			continue
		}
		if ctx == nil {
			// The round trip serves every caller of the batch: one
			// caller ending must not cancel it for the others.
			ctx = context.WithoutCancel(req.ctx)
		}
		req.cmds = make([]*redis.Cmd, len(req.calls))
		for i, args := range req.calls {
			req.cmds[i] = req.script.EvalSha(ctx, pipe, req.keys, args...)
		}
	}
	if ctx != nil {
		_, _ = pipe.Exec(ctx)
	}
}
