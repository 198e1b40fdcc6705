package logbuf_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/logbuf"
)

// sink records what reaches the output, one Write call at a time.
type sink struct {
	mu     sync.Mutex
	writes []string
	wrote  chan struct{} // receives after each write, without blocking
	err    error
}

func newSink() *sink { return &sink{wrote: make(chan struct{}, 1)} }

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.writes = append(s.writes, string(p))
	err := s.err
	s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return len(p), err
}

func (s *sink) all() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.writes, ""), len(s.writes)
}

func TestBatches(t *testing.T) {
	t.Parallel()
	out := newSink()
	w := logbuf.New(out, logbuf.Options{Interval: time.Hour})
	defer w.Close()
	for i := range 100 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if got, n := out.all(); n != 0 {
		t.Fatalf("%d writes before Flush: %q", n, got)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got, n := out.all()
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if n != 1 || got != want.String() {
		t.Fatalf("%d writes of %q, want one of every line in order", n, got)
	}
}

func TestInterval(t *testing.T) {
	t.Parallel()
	out := newSink()
	w := logbuf.New(out, logbuf.Options{Interval: 5 * time.Millisecond})
	defer w.Close()
	w.Write([]byte("hello\n"))
	select {
	case <-out.wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("a queued line was not written by the flusher")
	}
	if got, _ := out.all(); got != "hello\n" {
		t.Fatalf("output %q", got)
	}
}

// TestSizeBound: queued bytes never exceed Size; a line that would is
// written after what is queued, and a line of Size bytes or more goes out
// on its own, in order.
func TestSizeBound(t *testing.T) {
	t.Parallel()
	out := newSink()
	w := logbuf.New(out, logbuf.Options{Size: 100, Interval: time.Hour})
	defer w.Close()
	line := strings.Repeat("x", 39) + "\n" // 40 bytes
	for range 5 {
		w.Write([]byte(line))
	}
	// 2 lines per batch: the third waits for the first two to go.
	if _, n := out.all(); n != 2 {
		t.Fatalf("%d writes after 5 lines of 40 bytes with Size 100, want 2", n)
	}
	big := strings.Repeat("y", 150) + "\n"
	w.Write([]byte(big))
	got, n := out.all()
	if n != 4 || got != strings.Repeat(line, 5)+big {
		t.Fatalf("%d writes, output %q; want the queued line, then the big one", n, got)
	}
}

func TestCloseFlushesAndWritesThrough(t *testing.T) {
	t.Parallel()
	out := newSink()
	w := logbuf.New(out, logbuf.Options{Interval: time.Hour})
	w.Write([]byte("a\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("b\n"))
	if got, n := out.all(); got != "a\nb\n" || n != 2 {
		t.Fatalf("%d writes of %q, want a then b", n, got)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestErrorReported(t *testing.T) {
	t.Parallel()
	out := newSink()
	out.err = errors.New("disk full")
	w := logbuf.New(out, logbuf.Options{Interval: time.Hour})
	if _, err := w.Write([]byte("a\n")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := w.Close(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Close = %v, want the output's error", err)
	}
}

// TestConcurrentWriters: lines from many goroutines arrive whole, each
// goroutine's in its order.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	out := newSink()
	w := logbuf.New(out, logbuf.Options{Size: 512, Interval: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				fmt.Fprintf(w, "g%d %d\n", g, i)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := out.all()
	next := map[string]int{}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 8*500 {
		t.Fatalf("%d lines, want %d", len(lines), 8*500)
	}
	for _, l := range lines {
		var g string
		var i int
		if _, err := fmt.Sscanf(l, "%s %d", &g, &i); err != nil {
			t.Fatalf("garbled line %q", l)
		}
		if i != next[g] {
			t.Fatalf("%s: line %d after %d", g, i, next[g]-1)
		}
		next[g]++
	}
}
