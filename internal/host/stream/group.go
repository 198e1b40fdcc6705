package stream

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// checkpointEvery bounds how often a member that had nothing to do saves
// its checkpoint; one that acted on facts saves it with every batch. When
// the stream goes quiet, every member saves the position it has reached
// (see flushIdle), so a stored checkpoint does not stay behind facts the
// member skipped.
const checkpointEvery = time.Second

// Group reads the fact stream once for every consumer that has caught up
// with it (its members). A consumer that joins reads the stream on its
// own while it is behind, so a backfill never holds the others back, and
// becomes a member once it has read all there was. From then on one read
// of each new batch serves every member, instead of one read, one wake-up
// and one head query per consumer.
//
// Each member keeps its own checkpoint, so a restart, or a member dropped
// after its handler failed, reads on from there on its own and joins again
// once caught up; delivery stays at least once.
//
// Run reads for the members; Join runs a consumer in the group.
type Group struct {
	Store store.Store
	// BatchSize bounds the facts of one read (default 256); a consumer
	// joins when it is at most one batch behind the group.
	BatchSize int
	// PollInterval is the fallback wake-up when no notification arrives
	// (default 2 s).
	PollInterval time.Duration
	// Parallelism bounds how many members handle a batch at the same
	// time (default 256, in practice every member): members wait on Redis
	// or the database, not on the CPU, so a hundred of them handled in
	// rounds would make the last one lag by the sum of the rounds, while
	// handled together their Redis calls share a few pipelines.
	Parallelism int
	Logger      *slog.Logger

	once sync.Once
	mu   sync.Mutex
	// pos is the position of the last fact dispatched to the members.
	pos     int64
	members map[*Consumer]*member
	// lead is pos while the group has members, else -1: a consumer
	// reading on its own checks it after every batch without waiting for
	// g.mu, which a batch being handled holds.
	lead atomic.Int64
	// saving is the checkpoint write of the last batch while it runs:
	// the next batch is read and handled meanwhile, and waits for it
	// only before its own write (see step).
	saving *pendingSave
}

// pendingSave is one batch's checkpoint write in flight.
type pendingSave struct {
	done chan struct{}
	due  []*groupWork
	at   time.Time
	// saved is the stores whose write succeeded; read after done.
	saved map[store.Store]bool
}

// groupWork is one member's part in a batch.
type groupWork struct {
	c        *Consumer
	m        *member
	ok, save bool
	pos      int64 // the position saved, set by saveAll
}

type member struct {
	log     *slog.Logger
	pos     int64 // of the last fact handled
	savedAt time.Time
	saved   int64 // the position last stored
	// dropped receives the member's position when its handler failed and
	// the group dropped it.
	dropped chan int64
}

// Run reads new facts for the members until ctx ends; it returns nil then,
// or an error when the group is misconfigured.
func (g *Group) Run(ctx context.Context) error {
	if g.Store == nil {
		return errors.New("stream: group needs a store")
	}
	g.init()
	l := loop{store: g.Store, batchSize: g.BatchSize, pollInterval: g.PollInterval, log: g.Logger}
	l.run(ctx, g.step, nil, nil)
	// A clean stop leaves the last batch's checkpoints stored.
	g.mu.Lock()
	g.settle()
	g.mu.Unlock()
	return nil
}

// init applies the defaults once.
func (g *Group) init() {
	g.once.Do(func() {
		if g.BatchSize <= 0 {
			g.BatchSize = 256
		}
		if g.PollInterval <= 0 {
			g.PollInterval = 2 * time.Second
		}
		if g.Parallelism <= 0 {
			g.Parallelism = 256
		}
		if g.Logger == nil {
			g.Logger = slog.Default()
		}
		g.lead.Store(-1)
		g.Logger = g.Logger.With("reader", "group")
	})
}

// Join runs c until ctx ends: on its own while it is behind, as a member
// of the group once it has caught up, and on its own again if its handler
// fails. It returns nil then, or an error when c is misconfigured or
// already in the group. The group must be running (Run) for its members
// to receive facts.
func (g *Group) Join(ctx context.Context, c *Consumer) error {
	log, err := c.init()
	if err != nil {
		return err
	}
	g.init()
	g.mu.Lock()
	if g.members == nil {
		g.members = map[*Consumer]*member{}
	}
	_, dup := g.members[c]
	g.mu.Unlock()
	if dup {
		return errors.New("stream: consumer already in the group")
	}
	pos, ok := c.start(ctx, log)
	if !ok {
		return nil
	}
	m := &member{log: log, dropped: make(chan int64, 1)}
	defer g.leave(c)
	for {
		// A member resumes from where the group dropped it, not from
		// where follow stopped.
		if _, joined := c.follow(ctx, log, pos, func(ctx context.Context, p int64) bool { return g.attach(ctx, c, m, p) }); !joined {
			return nil // ctx ended
		}
		select {
		case <-ctx.Done():
			return nil
		case pos = <-m.dropped:
		}
	}
}

// attach makes c a member when its position p is at most one batch behind
// the group: the facts between are read and handled here first. A
// consumer ahead of the group skips what it has already handled. It
// reports whether c is now a member; if not, c keeps reading on its own.
// It is called after each of c's batches, full ones too: a consumer that
// trails the group by a batch or less while the stream grows as fast as
// it reads would never read a short batch, and would keep reading on its
// own for good.
func (g *Group) attach(ctx context.Context, c *Consumer, m *member, p int64) bool {
	if lead := g.lead.Load(); lead >= 0 && lead-p > int64(g.BatchSize) {
		return false // still too far behind
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members) == 0 {
		g.pos = p
	}
	if gap := g.pos - p; gap > 0 {
		if gap > int64(g.BatchSize) {
			return false
		}
		facts, err := g.Store.ReadFacts(ctx, p, int(gap))
		if err != nil || len(facts) != int(gap) || Continues(facts, p) != nil {
			return false
		}
		if err := c.deliver(ctx, facts); err != nil {
			return false
		}
		p = g.pos
		if err := c.Store.SetCheckpoint(ctx, c.Name, p); err != nil {
			return false
		}
	}
	m.pos, m.savedAt, m.saved = p, time.Now(), p
	g.members[c] = m
	g.lead.Store(g.pos)
	return true
}

// Members returns the names of the consumers the group feeds now, sorted.
func (g *Group) Members() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	names := make([]string, 0, len(g.members))
	for c := range g.members {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// leave stops dispatching to c; when it returns, the group no longer
// touches c, nor its checkpoint (a write in flight has landed). It can be
// called for a consumer that is not a member.
func (g *Group) leave(c *Consumer) {
	g.mu.Lock()
	g.settle()
	delete(g.members, c)
	if len(g.members) == 0 {
		g.lead.Store(-1)
	}
	g.mu.Unlock()
}

// step reads one batch after the group's position and hands each member
// the facts it has not handled yet. A member whose handler fails is
// dropped and reads on its own from where it was.
//
// The cycle is not strictly serial: the batch's checkpoint write runs
// while the next batch is read and handled, and the head query for the
// lag metrics while this one is handled; a new fact then waits for one
// read and one round of handlers, not also for the last batch's commit.
func (g *Group) step(ctx context.Context) (int, error) {
	g.mu.Lock()
	if len(g.members) == 0 {
		g.mu.Unlock()
		return 0, nil
	}
	pos := g.pos
	metrics := false
	for c := range g.members {
		metrics = metrics || c.Metrics != nil
	}
	g.mu.Unlock()

	facts, err := g.Store.ReadFacts(ctx, pos, g.BatchSize)
	if err != nil {
		return 0, err
	}
	if len(facts) == 0 {
		g.flushIdle(ctx, pos)
		return 0, nil
	}
	if err := Continues(facts, pos); err != nil {
		return 0, err
	}
	last := facts[len(facts)-1].Position
	// Only the lag metrics use the head: the query overlaps the handling.
	head := make(chan int64, 1)
	if metrics {
		go func() {
			h, err := g.Store.HeadPosition(ctx)
			if err != nil {
				h = -1
			}
			head <- h
		}()
	} else {
		head <- -1
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pos != pos {
		// Every member left and a new one started the group elsewhere
		// while this batch was read.
		return 0, nil
	}
	now := time.Now()
	todo := make([]groupWork, 0, len(g.members))
	for c, m := range g.members {
		todo = append(todo, groupWork{c: c, m: m})
	}
	// Each member is touched by one goroutine only; g.mu stays held, so
	// no member joins or leaves meanwhile.
	sem := make(chan struct{}, g.Parallelism)
	var wg sync.WaitGroup
	for i := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func(w *groupWork) {
			defer func() { <-sem; wg.Done() }()
			w.ok, w.save = g.feed(ctx, w.c, w.m, facts, last, now)
		}(&todo[i])
	}
	wg.Wait()
	// A member dropped below saves its own checkpoints from now on: the
	// last batch's write must land first, or it could overwrite a newer one.
	g.settle()
	var due []*groupWork
	for i := range todo {
		w := &todo[i]
		switch {
		case !w.ok:
			delete(g.members, w.c)
			w.m.dropped <- w.m.pos
		case w.save:
			due = append(due, w)
		}
	}
	g.saving = g.saveAll(ctx, due, now)
	if h := <-head; h >= 0 {
		for _, w := range todo {
			if w.ok && w.c.Metrics != nil {
				w.c.Metrics.record(w.c.Name, w.m.pos, h)
			}
		}
	}
	g.pos = last
	g.lead.Store(last)
	if len(g.members) == 0 {
		g.lead.Store(-1)
	}
	return len(facts), nil
}

// flushIdle stores the checkpoints of the members whose position is past
// the one stored, once the stream has nothing after pos: a member skips
// the facts it does not act on without saving each time, and without a
// next batch its stored checkpoint (which /v1/admin/stream shows and a
// restart reads from) would stay behind them.
func (g *Group) flushIdle(ctx context.Context, pos int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pos != pos {
		return
	}
	if p := g.saving; p != nil {
		select {
		case <-p.done:
		default:
			// A write is in flight: waiting for it would hold the next
			// batch back. The next quiet step stores what remains.
			return
		}
	}
	g.settle()
	var due []*groupWork
	for c, m := range g.members {
		if m.pos > m.saved {
			due = append(due, &groupWork{c: c, m: m, ok: true, save: true})
		}
	}
	g.saving = g.saveAll(ctx, due, time.Now())
}

// settle waits for the checkpoint write in flight, if any, and marks the
// members it saved; g.mu is held.
func (g *Group) settle() {
	p := g.saving
	if p == nil {
		return
	}
	<-p.done
	g.saving = nil
	for _, w := range p.due {
		if p.saved[w.c.Store] {
			w.m.savedAt, w.m.saved = p.at, max(w.m.saved, w.pos)
		}
	}
}

// feed hands one member the facts of a batch it has not handled yet. It
// reports false when the member's handler failed (the caller drops it),
// and whether its checkpoint is due.
func (g *Group) feed(ctx context.Context, c *Consumer, m *member, facts []store.Fact, last int64, now time.Time) (ok, save bool) {
	rest := facts
	for len(rest) > 0 && rest[0].Position <= m.pos {
		rest = rest[1:]
	}
	acted := false
	if len(rest) > 0 {
		if err := c.deliver(ctx, rest); err != nil {
			m.log.Warn("stream: handler failed; reading on its own", "err", err)
			if c.Metrics != nil {
				c.Metrics.failed(c.Name)
			}
			return false, false
		}
		m.pos = last
		acted = c.relevant(rest)
	}
	return true, acted || now.Sub(m.savedAt) >= checkpointEvery
}

// saveAll starts storing the due checkpoints of the batch's members, one
// write per store rather than one per member: a hundred projections on the
// stream would otherwise cost a hundred commits per batch. settle waits
// for it.
func (g *Group) saveAll(ctx context.Context, due []*groupWork, now time.Time) *pendingSave {
	if len(due) == 0 {
		return nil
	}
	byStore := map[store.Store]map[string]int64{}
	for _, w := range due {
		if byStore[w.c.Store] == nil {
			byStore[w.c.Store] = map[string]int64{}
		}
		w.pos = w.m.pos
		byStore[w.c.Store][w.c.Name] = w.pos
	}
	p := &pendingSave{done: make(chan struct{}), due: due, at: now, saved: map[store.Store]bool{}}
	go func() {
		defer close(p.done)
		saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for st, positions := range byStore {
			if err := st.SetCheckpoints(saveCtx, positions); err != nil {
				// Not fatal: a restart replays from the older checkpoints.
				g.Logger.Warn("stream: save checkpoints", "consumers", len(positions), "err", err)
				continue
			}
			p.saved[st] = true
		}
	}()
	return p
}
