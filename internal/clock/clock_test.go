package clock_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/clock/clocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRealUntilClosesAtTheTime(t *testing.T) {
	t.Parallel()
	past, release := clock.Real.Until(time.Now().Add(-time.Second))
	defer release()
	select {
	case <-past:
	default:
		t.Fatal("a wait for a past time is not closed at once")
	}
	soon, release2 := clock.After(clock.Real, time.Millisecond)
	defer release2()
	select {
	case <-soon:
	case <-time.After(30 * time.Second):
		t.Fatal("a 1 ms wait on the real clock never ended")
	}
	_, release3 := clock.After(clock.Real, time.Hour)
	release3() // stops the timer: goleak in TestMain sees nothing left
}

func TestOrDefaultsToReal(t *testing.T) {
	t.Parallel()
	if clock.Or(nil) != clock.Real {
		t.Fatal("Or(nil) is not Real")
	}
	m := clocktest.New(time.Unix(0, 0))
	if clock.Or(m) != m {
		t.Fatal("Or(c) is not c")
	}
}

func TestManualMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	c := clocktest.New(start)
	waiting := c.Waiting()
	late, _ := c.Until(start.Add(2 * time.Minute))
	early, _ := clock.After(c, time.Minute)
	cancelled, release := c.Until(start.Add(time.Minute))
	release()
	select {
	case <-waiting:
	default:
		t.Fatal("Waiting not signalled by a new wait")
	}
	if n := c.Waiters(); n != 2 {
		t.Fatalf("%d waiters, want 2 (one released)", n)
	}
	c.Advance(time.Minute)
	if !c.Now().Equal(start.Add(time.Minute)) {
		t.Fatalf("Now %v after Advance(1m)", c.Now())
	}
	select {
	case <-early:
	default:
		t.Fatal("the wait for +1m did not end at +1m")
	}
	for name, ch := range map[string]<-chan struct{}{"+2m": late, "released": cancelled} {
		select {
		case <-ch:
			t.Fatalf("the %s wait ended at +1m", name)
		default:
		}
	}
	c.Set(start) // never backwards
	if !c.Now().Equal(start.Add(time.Minute)) {
		t.Fatal("Set moved the clock backwards")
	}
	c.Set(start.Add(2 * time.Minute))
	<-late
}

// TestClocktestOnlyInTests: production code cannot run on a clock that
// never moves.
func TestClocktestOnlyInTests(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/factline/factline/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if strings.Contains(" "+imports+" ", " github.com/factline/factline/internal/clock/clocktest ") {
			t.Errorf("%s imports clocktest outside its tests", pkg)
		}
	}
}
