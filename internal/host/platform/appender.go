package platform

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// appender group-commits fact appends: concurrent callers hand their items
// to one goroutine, which commits whatever has queued up as one
// transaction. Appends are serialised on the global position counter
// anyway, so one committer per process loses nothing and turns N
// round trips and fsyncs into one.
type appender struct {
	store store.Store
	max   int
	reqs  chan *appendReq
	stop  chan struct{}
	done  sync.WaitGroup
}

type appendReq struct {
	ctx     context.Context
	items   []store.Append
	results []store.AppendResult
	err     error
	ready   chan struct{}
}

// errAppenderClosed is returned for appends after Close.
var errAppenderClosed = errors.New("platform: appender is closed")

// commitTimeout bounds one group commit; it is independent of the callers'
// contexts because one batch serves many callers.
const commitTimeout = 30 * time.Second

func newAppender(s store.Store, max int) *appender {
	a := &appender{store: s, max: max, reqs: make(chan *appendReq, max), stop: make(chan struct{})}
	a.done.Add(1)
	go a.run()
	return a
}

// append commits items (in order, each succeeding or failing on its own)
// and returns one result per item.
func (a *appender) append(ctx context.Context, items []store.Append) ([]store.AppendResult, error) {
	r := &appendReq{ctx: ctx, items: items, ready: make(chan struct{})}
	select {
	case a.reqs <- r:
	case <-a.stop:
		return nil, errAppenderClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Once queued, wait for the outcome even if ctx ends: the items may be
	// committed, and the caller must learn that rather than guess.
	<-r.ready
	return r.results, r.err
}

func (a *appender) close() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	a.done.Wait()
}

func (a *appender) run() {
	defer a.done.Done()
	batch := make([]*appendReq, 0, a.max)
	for {
		var first *appendReq
		select {
		case first = <-a.reqs:
		case <-a.stop:
			a.drain()
			return
		}
		batch = append(batch[:0], first)
		n := len(first.items)
	collect:
		for n < a.max {
			select {
			case r := <-a.reqs:
				batch = append(batch, r)
				n += len(r.items)
			default:
				break collect
			}
		}
		a.commit(batch)
	}
}

// drain answers requests still queued at shutdown by committing them.
func (a *appender) drain() {
	for {
		select {
		case r := <-a.reqs:
			a.commit([]*appendReq{r})
		default:
			return
		}
	}
}

func (a *appender) commit(batch []*appendReq) {
	items := make([]store.Append, 0, len(batch))
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			// The caller gave up before anything was written: skip it.
			r.err = err
			close(r.ready)
			continue
		}
		live = append(live, r)
		items = append(items, r.items...)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	results, err := a.store.AppendFacts(ctx, items)
	cancel()
	off := 0
	for _, r := range live {
		if err != nil {
			r.err = err
		} else {
			r.results = results[off : off+len(r.items)]
		}
		off += len(r.items)
		close(r.ready)
	}
}
