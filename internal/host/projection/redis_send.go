package projection

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// maxSendCalls bounds the script calls of one shared round trip.
const maxSendCalls = 256

// sendReq is the script calls of one apply, waiting for their round trip.
type sendReq struct {
	ctx    context.Context
	keys   []string
	script *redis.Script
	calls  [][]any
	cmds   []*redis.Cmd // filled in by the round trip
	done   chan struct{}
}

// sender gathers the script calls that concurrent applies (the projections
// fed one batch of the stream, each with its own key) send while a round
// trip is in flight, and sends them together as one pipeline: a hundred
// projections then cost Redis and the process a few round trips per batch
// rather than a hundred, each waiting for one of the client's pooled
// connections. A lone apply goes out at once. Each call stays atomic on
// its own and gets its own answer.
type sender struct {
	mu      sync.Mutex
	pending []*sendReq
	running bool // a flusher is sending
}

// send runs req's calls, in a round trip shared with the calls of other
// applies, and fills in req.cmds; it returns early only when ctx ends.
func (r *RedisState) send(ctx context.Context, req *sendReq) error {
	req.ctx, req.done = ctx, make(chan struct{})
	s := &r.root.sender
	s.mu.Lock()
	s.pending = append(s.pending, req)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go r.flushLoop()
	}
	select {
	case <-req.done:
		if req.cmds == nil {
			return ctx.Err() // left out: ctx ended before the round trip
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushLoop sends what is pending, one round trip at a time, until
// nothing is.
func (r *RedisState) flushLoop() {
	s := &r.root.sender
	for {
		s.mu.Lock()
		n, calls := 0, 0
		for n < len(s.pending) && (n == 0 || calls+len(s.pending[n].calls) <= maxSendCalls) {
			calls += len(s.pending[n].calls)
			n++
		}
		if n == 0 {
			s.running = false
			s.pending = nil
			s.mu.Unlock()
			return
		}
		batch := s.pending[:n:n]
		s.pending = s.pending[n:]
		s.mu.Unlock()
		r.flush(batch)
		for _, req := range batch {
			close(req.done)
		}
	}
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
