package testutil

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Logs collects what a logger writes, for tests that wait until a
// service has logged something (a refusal, a reload) before going on.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer; it is safe for concurrent use.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Contains reports whether s has been logged.
func (l *Logs) Contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Take returns what was logged since the last Take and forgets it.
func (l *Logs) Take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	l.buf.Reset()
	return s
}

// Logger is a text logger writing to l.
func (l *Logs) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
