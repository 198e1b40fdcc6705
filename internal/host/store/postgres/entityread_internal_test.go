package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/testutil"
)

// waitLong bounds every wait of these tests: generous, for a loaded machine.
const waitLong = 60 * time.Second

// holdFlights makes the store's single-key reads wait for release, and
// returns it.
func holdFlights(s *Store) (release func()) {
	gate := make(chan struct{})
	one := s.reads.one
	s.reads.one = func(ctx context.Context, tenant, id string) (*store.Entity, error) {
		<-gate
		return one(ctx, tenant, id)
	}
	return sync.OnceFunc(func() { close(gate) })
}

func pendingReads(s *Store) int {
	return s.reads.g.Pending()
}

// TestGetEntityGathersConcurrentReads: while readFlights reads are in
// flight, the GetEntity calls that arrive are answered by one statement
// for all of them: every call gets its own entity, a missing or another
// tenant's id ErrNotFound.
func TestGetEntityGathersConcurrentReads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	for i := range 50 {
		e := &store.Entity{TenantID: fmt.Sprintf("t%d", i%5), ID: fmt.Sprintf("e%02d", i), Type: "account",
			Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), CreatedAt: 1, UpdatedAt: 1}
		if err := s.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	release := holdFlights(s)
	defer release()

	type call struct {
		tenant, id string
		e          *store.Entity
		err        error
		done       chan struct{}
	}
	start := func(tenant, id string) *call {
		c := &call{tenant: tenant, id: id, done: make(chan struct{})}
		go func() {
			defer close(c.done)
			c.e, c.err = s.GetEntity(ctx, tenant, id)
		}()
		return c
	}
	// One call at a time, so that each flight holds one read.
	var held []*call
	for i := range readFlights {
		held = append(held, start(fmt.Sprintf("t%d", i%5), fmt.Sprintf("e%02d", i)))
		testutil.Eventually(t, waitLong, fmt.Sprintf("flight %d holds a read", i+1), func() bool {
			return s.reads.statements.Load() == int64(i+1)
		})
	}

	var gathered []*call
	for i := range 60 { // e50..e59 do not exist; e05 twice
		gathered = append(gathered, start(fmt.Sprintf("t%d", i%5), fmt.Sprintf("e%02d", i)))
	}
	gathered = append(gathered, start("t0", "e05"), start("t1", "e05"), start("t0", "e01"))
	testutil.Eventually(t, waitLong, "the calls wait together", func() bool { return pendingReads(s) == len(gathered) })
	release()
	for _, c := range append(held, gathered...) {
		select {
		case <-c.done:
		case <-time.After(waitLong):
			t.Fatalf("GetEntity %s/%s did not return", c.tenant, c.id)
		}
	}
	if got, want := s.reads.statements.Load(), int64(readFlights+1); got != want {
		t.Errorf("%d statements for %d reads, want %d", got, len(held)+len(gathered), want)
	}
	for _, c := range append(held, gathered...) {
		var i int
		fmt.Sscanf(c.id, "e%d", &i)
		if i >= 50 || c.tenant != fmt.Sprintf("t%d", i%5) {
			if !errors.Is(c.err, store.ErrNotFound) {
				t.Errorf("GetEntity %s/%s: %v, %v, want ErrNotFound", c.tenant, c.id, c.e, c.err)
			}
			continue
		}
		if c.err != nil || c.e.TenantID != c.tenant || c.e.ID != c.id || !strings.Contains(string(c.e.Data), fmt.Sprintf(`"n": %d}`, i)) {
			t.Errorf("GetEntity %s/%s: %+v, %v", c.tenant, c.id, c.e, c.err)
		}
	}
}

// TestGetEntityGatheredCallerGivesUp: a call that gives up returns its
// context's error without failing the calls read with it, and the shared
// statement is cancelled only once every one of its calls has given up.
func TestGetEntityGatheredCallerGivesUp(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	hold := make(chan struct{})
	b := newEntityReads(
		func(ctx context.Context, tenant, id string) (*store.Entity, error) {
			if tenant == "held" {
				<-hold
				return nil, nil
			}
			return nil, errors.New("unexpected single read")
		},
		func(ctx context.Context, tenants, ids []string) ([]*store.Entity, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, ctx.Err()
		},
	)
	// Every flight busy with a lone read held until both calls wait.
	for i := range readFlights {
		go b.get(t.Context(), "held", fmt.Sprint(i))
		testutil.Eventually(t, waitLong, fmt.Sprintf("flight %d holds a read", i+1), func() bool {
			return b.statements.Load() == int64(i+1)
		})
	}
	ctxA, cancelA := context.WithCancel(t.Context())
	ctxB, cancelB := context.WithCancel(t.Context())
	defer cancelA()
	defer cancelB()
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { _, err := b.get(ctxA, "t", "a"); errA <- err }()
	go func() { _, err := b.get(ctxB, "t", "b"); errB <- err }()
	testutil.Eventually(t, waitLong, "both calls wait", func() bool {
		return b.g.Pending() == 2
	})
	close(hold)
	<-started
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call that gave up: %v, want context.Canceled", err)
	}
	select {
	case err := <-cancelled:
		t.Fatalf("the statement was cancelled (%v) while a call still waited for it", err)
	default:
	}
	cancelB()
	select {
	case <-cancelled:
	case <-time.After(waitLong):
		t.Fatal("the statement was not cancelled once every call gave up")
	}
	if err := <-errB; !errors.Is(err, context.Canceled) {
		t.Fatalf("the second call: %v, want context.Canceled", err)
	}
}

// TestGetEntitiesUsesThePrimaryKey: the statement of gathered reads looks
// each key up in the primary key, on a table of many tenants' entities.
func TestGetEntitiesUsesThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	_, err := s.pool.Exec(ctx, `INSERT INTO entities (tenant_id, id, type, version, data, created_at, updated_at)
SELECT 'tnt_' || (g % 100), 'ent_' || g, 'account', 1, '{}', 1, 1 FROM generate_series(1, 20000) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE entities`); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 64, readBatchMax} {
		tenants, ids := make([]string, n), make([]string, n)
		for i := range n {
			tenants[i], ids[i] = fmt.Sprintf("tnt_%d", i*7%100), fmt.Sprintf("ent_%d", i*7+1)
		}
		p := explain(t, s, getEntities, tenants, ids)
		if !strings.Contains(p, "entities_pkey") || strings.Contains(p, "Seq Scan on entities") {
			t.Errorf("%d keys: the plan does not look keys up in entities_pkey:\n%s", n, p)
		}
	}
}
