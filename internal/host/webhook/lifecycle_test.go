package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/factline/factline/internal/lifecycle"
)

// TestSecondStartIsRefusedAndStopWaits: the service starts once, and Stop
// returns only when its matcher, workers and gauges have returned.
func TestSecondStartIsRefusedAndStopWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	if err := e.svc.Stop(t.Context()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	e.start()
	if err := e.svc.Start(context.Background()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.svc.bg.Stopped():
	default:
		t.Fatal("Stop returned before the background tasks did")
	}
}
