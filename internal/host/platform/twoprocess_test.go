package platform_test

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/teststore"
)

// TestAppendsWithoutExpectedVersionNeverConflictAcrossProcesses: two
// platforms with their own stores on one PostgreSQL database (two gateway
// processes) append to one entity of a state-dependent ledger, with no
// expected_version, from eight goroutines. No append may fail with a
// conflict: the caller did not ask for optimistic concurrency. The ledger
// ends with seq 1..N gap-free, the version counts every fact and the
// snapshot folds all of them.
func TestAppendsWithoutExpectedVersionNeverConflictAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbURL := teststore.Location(t, "postgres")
	procs := []process{openProcess(t, "postgres", dbURL, "proc-a"), openProcess(t, "postgres", dbURL, "proc-b")}
	ctx := t.Context()
	if _, err := procs[0].svc.CreateEntity(ctx, "tnt", platform.CreateEntityInput{Type: "counter", ID: "ctr-hot"}); err != nil {
		t.Fatal(err)
	}

	const goroutines, each = 8, 100
	var (
		wg        sync.WaitGroup
		conflicts atomic.Int64
		mu        sync.Mutex
		seqs      = map[int64]int{}
	)
	for g := range goroutines {
		p := procs[g%len(procs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				f, err := p.svc.AppendFact(ctx, "tnt", platform.AppendFactInput{EntityID: "ctr-hot", Type: "tick"})
				var pe *problem.Error
				switch {
				case errors.As(err, &pe) && pe.Kind == problem.Conflict:
					conflicts.Add(1)
					t.Errorf("append without expected_version: %v", err)
					continue
				case err != nil:
					t.Error(err)
					return
				}
				mu.Lock()
				seqs[f.Seq]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := conflicts.Load(); n > 0 {
		t.Fatalf("%d of %d appends answered with a conflict", n, goroutines*each)
	}
	const n = goroutines * each
	for s := int64(1); s <= n; s++ {
		if seqs[s] != 1 {
			t.Fatalf("seq %d recorded %d times", s, seqs[s])
		}
	}
	if len(seqs) != n {
		t.Fatalf("%d distinct seqs, want %d", len(seqs), n)
	}
	stored, err := procs[1].store.GetEntity(ctx, "tnt", "ctr-hot")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Version != n+1 {
		t.Fatalf("entity version %d, want %d", stored.Version, n+1)
	}
	var s cappedState
	if err := json.Unmarshal(stored.State, &s); err != nil || s.N != n {
		t.Fatalf("snapshot %s, want n=%d", stored.State, n)
	}
}
