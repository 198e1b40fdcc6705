package gather_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/gather"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// waitLong bounds every wait: generous, for a loaded machine.
const waitLong = 60 * time.Second

type call struct {
	id, weight int
	result     int // set by the flush
}

// recorder is a flush func that records its batches' call ids and answers
// each call with its id times ten; the first hold round trips wait for
// release.
type recorder struct {
	mu       sync.Mutex
	batches  [][]int
	inFlight int
	most     int // largest inFlight seen

	hold    int
	held    chan struct{} // receives once per held round trip
	release chan struct{}
}

func newRecorder(hold int) *recorder {
	return &recorder{hold: hold, held: make(chan struct{}, hold), release: make(chan struct{})}
}

func (r *recorder) flush(batch []*call) {
	r.mu.Lock()
	ids := make([]int, len(batch))
	for i, c := range batch {
		ids[i] = c.id
	}
	r.batches = append(r.batches, ids)
	r.inFlight++
	r.most = max(r.most, r.inFlight)
	wait := r.hold > 0
	r.hold--
	r.mu.Unlock()
	if wait {
		r.held <- struct{}{}
		<-r.release
	}
	for _, c := range batch {
		c.result = c.id * 10
	}
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
}

func (r *recorder) got() ([][]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches), r.most
}

// do runs Do for c on a goroutine and reports its error and result.
func do(g *gather.Gatherer[*call], ctx context.Context, c *call) <-chan error {
	errc := make(chan error, 1)
	go func() {
		err := g.Do(ctx, c)
		if err == nil && c.result != c.id*10 {
			err = fmt.Errorf("call %d: result %d, want %d", c.id, c.result, c.id*10)
		}
		errc <- err
	}()
	return errc
}

func waitErr(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(waitLong):
		t.Fatal("Do did not return")
		return nil
	}
}

func waitPending(t *testing.T, g *gather.Gatherer[*call], n int) {
	t.Helper()
	testutil.Eventually(t, waitLong, fmt.Sprintf("%d calls pending", n), func() bool { return g.Pending() == n })
}

// TestGathererBatches: calls that arrive while the first round trip is
// held go out together in the next ones, within the bound by count or by
// weight; a lone call goes out at once.
func TestGathererBatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     gather.Config[*call]
		held    bool  // call 0 holds the first round trip
		weights []int // of the calls 1.. that arrive meanwhile
		want    [][]int
	}{
		{name: "lone call goes out at once", want: [][]int{{0}}},
		{name: "concurrent calls share a round trip", held: true, weights: []int{1, 1, 1, 1},
			want: [][]int{{0}, {1, 2, 3, 4}}},
		{name: "the bound is respected", cfg: gather.Config[*call]{Max: 3}, held: true, weights: []int{1, 1, 1, 1, 1, 1, 1},
			want: [][]int{{0}, {1, 2, 3}, {4, 5, 6}, {7}}},
		{name: "the bound counts weights", cfg: gather.Config[*call]{Max: 4, Weight: func(c *call) int { return c.weight }},
			held: true, weights: []int{2, 2, 1, 3, 5, 4},
			want: [][]int{{0}, {1, 2}, {3, 4}, {5}, {6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hold := 0
			if tc.held {
				hold = 1
			}
			r := newRecorder(hold)
			g := gather.New(tc.cfg, r.flush)
			errs := []<-chan error{do(g, t.Context(), &call{id: 0, weight: 1})}
			if tc.held {
				<-r.held
			}
			for i, w := range tc.weights {
				errs = append(errs, do(g, t.Context(), &call{id: i + 1, weight: w}))
				waitPending(t, g, i+1) // in order of arrival
			}
			close(r.release)
			for _, errc := range errs {
				if err := waitErr(t, errc); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := r.got(); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("round trips %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGathererFlightsBoundConcurrency: with every flight busy, further
// calls wait, and no more round trips than flights run at once.
func TestGathererFlightsBoundConcurrency(t *testing.T) {
	t.Parallel()
	for _, flights := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(flights), func(t *testing.T) {
			t.Parallel()
			r := newRecorder(flights)
			g := gather.New(gather.Config[*call]{Flights: flights}, r.flush)
			var errs []<-chan error
			for i := range flights {
				errs = append(errs, do(g, t.Context(), &call{id: i}))
				<-r.held
			}
			for i := range 5 {
				errs = append(errs, do(g, t.Context(), &call{id: flights + i}))
			}
			waitPending(t, g, 5)
			close(r.release)
			for _, errc := range errs {
				if err := waitErr(t, errc); err != nil {
					t.Fatal(err)
				}
			}
			if _, most := r.got(); most != flights {
				t.Fatalf("%d round trips at once, want %d", most, flights)
			}
		})
	}
}

// TestGathererCallerGivesUp: a caller whose context ends returns its
// error while the calls gathered with it still get their results.
func TestGathererCallerGivesUp(t *testing.T) {
	t.Parallel()
	r := newRecorder(2) // the first round trip, then the shared one
	g := gather.New(gather.Config[*call]{}, r.flush)
	first := do(g, t.Context(), &call{id: 0})
	<-r.held
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	gaveUp := do(g, ctx, &call{id: 1})
	waitPending(t, g, 1)
	other := do(g, t.Context(), &call{id: 2})
	waitPending(t, g, 2)
	r.release <- struct{}{} // the first round trip ends
	<-r.held                // the shared one starts
	cancel()
	if err := waitErr(t, gaveUp); !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v, want context.Canceled", err)
	}
	close(r.release)
	for _, errc := range []<-chan error{first, other} {
		if err := waitErr(t, errc); err != nil {
			t.Fatal(err)
		}
	}
}
