// Package logbuf batches log output. A Writer copies each Write (a whole
// log line, the way slog handlers write them) into a buffer that goes to
// the output when it holds Size bytes, every Interval, and on Flush and
// Close, so a busy server's request log costs one write system call per
// batch instead of one per line.
//
// Lines reach the output whole and in the order they were written. A
// Write waits while the buffer is full and the output busy, so memory
// stays bounded. What a crash loses is at most the last Interval of lines
// (a Go panic's own report is written by the runtime, not through here).
package logbuf

import (
	"io"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultSize     = 64 << 10
	DefaultInterval = 100 * time.Millisecond
)

// Options configure a Writer. The zero value is valid.
type Options struct {
	// Size is how many bytes wait at most before they are written
	// (default 64 KiB).
	Size int
	// Interval is the longest a line waits (default 100 ms).
	Interval time.Duration
}

// Writer is a batching io.Writer. It is safe for concurrent use.
type Writer struct {
	out  io.Writer
	size int

	mu     sync.Mutex // guards buf and closed
	buf    []byte     // lines waiting
	closed bool       // Close ran: writes go straight out

	outMu sync.Mutex // serialises writes to out, keeping batches in order
	spare []byte     // the other buffer; guarded by outMu
	err   error      // the first error of out; guarded by outMu

	stop, done chan struct{}
	closeOnce  sync.Once
}

// New returns a Writer on out and starts its flusher; Close stops it.
func New(out io.Writer, opts Options) *Writer {
	if opts.Size <= 0 {
		opts.Size = DefaultSize
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	w := &Writer{out: out, size: opts.Size, buf: make([]byte, 0, opts.Size), spare: make([]byte, 0, opts.Size),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.flushEvery(opts.Interval)
	return w
}

// Write queues p. It never fails: an error of the output is reported by
// Flush and Close.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	for !w.closed && len(w.buf) > 0 && len(w.buf)+len(p) > w.size {
		w.mu.Unlock()
		_ = w.Flush() // an output error is kept for Flush's callers
		w.mu.Lock()
	}
	if w.closed || len(p) >= w.size {
		// Straight out, after what is queued.
		w.mu.Unlock()
		w.outMu.Lock()
		defer w.outMu.Unlock()
		w.flushLocked()
		w.write(p)
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	w.mu.Unlock()
	return len(p), nil
}

// Flush writes what is queued and returns the first error the output has
// returned so far.
func (w *Writer) Flush() error {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.flushLocked()
	return w.err
}

// flushLocked writes the queued lines; w.outMu is held.
func (w *Writer) flushLocked() {
	w.mu.Lock()
	batch := w.buf
	w.buf = w.spare[:0]
	w.mu.Unlock()
	if len(batch) > 0 {
		w.write(batch)
	}
	w.spare = batch[:0]
}

// write writes p to the output; w.outMu is held.
func (w *Writer) write(p []byte) {
	if _, err := w.out.Write(p); err != nil && w.err == nil {
		w.err = err
	}
}

func (w *Writer) flushEvery(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			_ = w.Flush()
		}
	}
}

// Close stops the flusher and writes what is queued; later writes go
// straight to the output. It returns the first error of the output.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop)
		<-w.done
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	})
	return w.Flush()
}
