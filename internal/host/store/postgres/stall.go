package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/factline/factline/internal/host/store"
)

// DefaultStallTimeout is how long the database may take to answer the
// stall guard's probe before the store reports it unavailable.
const DefaultStallTimeout = 5 * time.Second

// stallProbeInterval is the pause between two probes.
const stallProbeInterval = time.Second

// stallGuard fails the store fast while the database does not answer.
//
// A server that refuses connections is noticed by every statement at
// once. One that stops answering (a frozen host, a route that drops
// packets) is not: every statement waits for its caller's deadline, each
// request holds a connection for its full 30 s and then times out, and
// the pool's waiters pile up behind them. The guard probes the server on
// a connection of its own, outside the pool; when a probe is not
// answered within the stall timeout, it cuts every statement in flight
// and refuses new ones with store.ErrUnavailable until a probe is
// answered again (within a probe interval of the server's return).
//
// It is the pools' pgx tracer: each statement, batch, connect and pool
// acquire runs on a context the guard cancels when it trips.
type stallGuard struct {
	probeConfig *pgx.ConnConfig // without the guard as tracer
	timeout     time.Duration
	logger      *slog.Logger

	state atomic.Pointer[guardState]

	cancel context.CancelFunc
	done   chan struct{}
}

// guardState is one period of the guard: up while down is nil. The
// context of an up period is cancelled when it ends.
type guardState struct {
	ctx    context.Context
	cancel context.CancelFunc
	down   error
}

func newStallGuard(probeConfig *pgx.ConnConfig, timeout time.Duration, logger *slog.Logger) *stallGuard {
	g := &stallGuard{probeConfig: probeConfig, timeout: timeout, logger: logger, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	g.state.Store(&guardState{ctx: ctx, cancel: cancel})
	return g
}

// start runs the probes until stop.
func (g *stallGuard) start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.run(ctx)
}

// stop ends the probes and waits for them.
func (g *stallGuard) stop() {
	if g.cancel == nil {
		return
	}
	g.cancel()
	<-g.done
	g.state.Load().cancel()
}

// down returns why the database is reported unavailable, or nil.
func (g *stallGuard) down() error {
	if g == nil {
		return nil
	}
	return g.state.Load().down
}

func (g *stallGuard) run(ctx context.Context) {
	defer close(g.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeQuietly(conn)
		}
	}()
	tick := time.NewTicker(stallProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		conn, err = g.probe(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			g.trip(err)
		} else {
			g.reset()
		}
	}
}

// probe pings the server on conn, connecting first when conn is nil. It
// returns the connection to probe on next time: nil after a failure.
func (g *stallGuard) probe(ctx context.Context, conn *pgx.Conn) (*pgx.Conn, error) {
	pctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	var err error
	if conn == nil {
		if conn, err = pgx.ConnectConfig(pctx, g.probeConfig); err != nil {
			return nil, g.reason(pctx, err)
		}
	}
	if err = conn.Ping(pctx); err != nil {
		closeQuietly(conn)
		return nil, g.reason(pctx, err)
	}
	return conn, nil
}

func (g *stallGuard) reason(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the database did not answer within %v", g.timeout)
	}
	return fmt.Errorf("the database cannot be reached: %w", err)
}

func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// trip reports the database down, cutting every statement in flight.
func (g *stallGuard) trip(reason error) {
	old := g.state.Load()
	if old.down == nil {
		g.logger.Warn("postgres: the database is unavailable; statements fail until it answers again", "reason", reason.Error())
	}
	g.state.Store(&guardState{ctx: old.ctx, cancel: old.cancel, down: reason})
	old.cancel()
}

// reset reports the database up again.
func (g *stallGuard) reset() {
	if g.state.Load().down == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.state.Store(&guardState{ctx: ctx, cancel: cancel})
	g.logger.Info("postgres: the database answers again")
}

// guard returns the context a statement runs on: ctx, cancelled too when
// the guard trips (or already cancelled while it is tripped), and the
// release that ends the statement's watch.
type releaseKey struct{}

func (g *stallGuard) guard(ctx context.Context) context.Context {
	st := g.state.Load()
	cctx, cancel := context.WithCancel(ctx)
	if st.down != nil {
		cancel()
		return cctx
	}
	stop := context.AfterFunc(st.ctx, cancel)
	return context.WithValue(cctx, releaseKey{}, func() { stop(); cancel() })
}

func release(ctx context.Context) {
	if f, ok := ctx.Value(releaseKey{}).(func()); ok {
		f()
	}
}

// classify reports an error of a statement the guard cut, or one that
// ran out its deadline while the guard was tripped, as
// store.ErrUnavailable rather than as a cancellation or a timeout.
func (g *stallGuard) classify(err error) error {
	err = markUnavailable(err)
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if down := g.down(); down != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("%w: %w (%v)", store.ErrUnavailable, down, err)
	}
	return err
}

// The pgx tracer hooks: every way a pool reaches the server.

func (g *stallGuard) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return g.guard(ctx)
}

func (g *stallGuard) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	release(ctx)
}

func (g *stallGuard) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return g.guard(ctx)
}

func (g *stallGuard) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (g *stallGuard) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	release(ctx)
}

func (g *stallGuard) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return g.guard(ctx)
}

func (g *stallGuard) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) {
	release(ctx)
}

func (g *stallGuard) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return g.guard(ctx)
}

func (g *stallGuard) TraceConnectEnd(ctx context.Context, _ pgx.TraceConnectEndData) {
	release(ctx)
}

func (g *stallGuard) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return g.guard(ctx)
}

func (g *stallGuard) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	release(ctx)
}

var (
	_ pgx.QueryTracer       = (*stallGuard)(nil)
	_ pgx.BatchTracer       = (*stallGuard)(nil)
	_ pgx.PrepareTracer     = (*stallGuard)(nil)
	_ pgx.ConnectTracer     = (*stallGuard)(nil)
	_ pgxpool.AcquireTracer = (*stallGuard)(nil)
)
