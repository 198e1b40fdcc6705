package projector

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/factline/factline/host/stream"
)

// checkpointEvery bounds how often a follower that had nothing to do saves
// its checkpoint; one that handled facts saves it with every batch.
const checkpointEvery = time.Second

// tail reads the fact stream once for every runtime that has caught up
// with it (its followers). A runtime reads the stream through a consumer
// of its own while it backfills, so a backfill never holds the others
// back, and joins the tail once it has read all there was. From then on
// one read of each new batch serves every follower, instead of one read,
// one wake-up and one head query per projection.
//
// Each follower keeps its own checkpoint (the name its consumer uses), so
// a restart, or a follower dropped after a failure, reads on from there;
// delivery stays at least once and the engines' fact-id dedupe makes the
// results exactly once.
type tail struct {
	s *Service

	mu sync.Mutex
	// pos is the position of the last fact dispatched to the followers.
	pos       int64
	followers map[*runtime]*follower
}

type follower struct {
	savedAt time.Time
}

func newTail(s *Service) *tail {
	return &tail{s: s, followers: map[*runtime]*follower{}}
}

// attach makes rt a follower when its position p is at most one batch
// behind the tail: the facts between are read and handled here first. A
// runtime ahead of the tail skips what it has already handled. It reports
// whether rt is now a follower; if not, rt keeps reading on its own.
func (t *tail) attach(ctx context.Context, rt *runtime, p int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.followers[rt]; ok {
		return true
	}
	if len(t.followers) == 0 {
		t.pos = p
	}
	if gap := t.pos - p; gap > 0 {
		if gap > int64(t.s.opts.BatchSize) {
			return false
		}
		facts, err := t.s.opts.Store.ReadFacts(ctx, p, int(gap))
		if err != nil || len(facts) != int(gap) || stream.Continues(facts, p) != nil {
			return false
		}
		if _, err := rt.handle(ctx, facts); err != nil {
			return false
		}
		if err := t.s.opts.Store.SetCheckpoint(ctx, rt.consumerName(), rt.pos.Load()); err != nil {
			return false
		}
	}
	t.followers[rt] = &follower{savedAt: time.Now()}
	return true
}

// detach stops dispatching to rt; when it returns, the tail no longer
// touches rt. It can be called for a runtime that is not a follower.
func (t *tail) detach(rt *runtime) {
	t.mu.Lock()
	delete(t.followers, rt)
	t.mu.Unlock()
}

// run dispatches new facts to the followers until ctx ends.
func (t *tail) run(ctx context.Context) {
	// Without a subscription the tail polls, and tries to subscribe again
	// each round.
	var wake <-chan struct{}
	subscribeFailed := false
	failures := 0
	for {
		if wake == nil {
			w, err := t.s.opts.Store.SubscribeFacts(ctx)
			switch {
			case err == nil:
				wake, subscribeFailed = w, false
			case !subscribeFailed && ctx.Err() == nil:
				subscribeFailed = true
				t.s.log.Warn("projection: subscribe to new facts failed; polling meanwhile", "err", err)
			}
		}
		n, err := t.step(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			delay := min(time.Duration(failures)*100*time.Millisecond, 5*time.Second)
			t.s.log.Warn("projection: shared stream read failed; retrying", "retry_in", delay, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		failures = 0
		if n == t.s.opts.BatchSize {
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-time.After(t.s.opts.PollInterval):
		}
	}
}

// step reads one batch after the tail's position and hands each follower
// the facts it has not handled yet. A follower whose handler fails is
// dropped and reads on its own from its checkpoint.
func (t *tail) step(ctx context.Context) (int, error) {
	t.mu.Lock()
	if len(t.followers) == 0 {
		t.mu.Unlock()
		return 0, nil
	}
	pos := t.pos
	t.mu.Unlock()

	st := t.s.opts.Store
	facts, err := st.ReadFacts(ctx, pos, t.s.opts.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("read facts: %w", err)
	}
	if len(facts) == 0 {
		return 0, nil
	}
	if err := stream.Continues(facts, pos); err != nil {
		return 0, err
	}
	last := facts[len(facts)-1].Position
	var head int64 = -1
	if t.s.opts.Metrics != nil {
		if h, err := st.HeadPosition(ctx); err == nil {
			head = h
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pos != pos {
		// Every follower left and a new one started the tail elsewhere
		// while this batch was read.
		return 0, nil
	}
	now := time.Now()
	for rt, f := range t.followers {
		rest := facts
		for len(rest) > 0 && rest[0].Position <= rt.pos.Load() {
			rest = rest[1:]
		}
		handled := 0
		if len(rest) > 0 {
			n, err := rt.handle(ctx, rest)
			if err != nil {
				t.s.log.Warn("projection: handler failed; reading on its own", "state_key", rt.key, "err", err)
				delete(t.followers, rt)
				rt.dropped()
				continue
			}
			handled = n
		}
		if handled > 0 || now.Sub(f.savedAt) >= checkpointEvery {
			saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err := st.SetCheckpoint(saveCtx, rt.consumerName(), rt.pos.Load())
			cancel()
			if err != nil {
				// Not fatal: a restart replays from the older checkpoint.
				t.s.log.Warn("projection: save checkpoint", "state_key", rt.key, "err", err)
			} else {
				f.savedAt = now
			}
		}
		if head >= 0 {
			t.s.opts.Metrics.Record(rt.consumerName(), rt.pos.Load(), head)
		}
	}
	t.pos = last
	return len(facts), nil
}
