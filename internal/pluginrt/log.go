package pluginrt

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
)

// Guest logging limits: lines are cut at maxLogLine bytes, and each plugin
// version may log logBurst lines at once and logRate lines per second on
// average; the rest are dropped and counted.
const (
	maxLogLine = 1024
	logRate    = 100
	logBurst   = 200
)

// hostLog implements factline.log(level, ptr, len): a log line attributed
// to the plugin. Out-of-bounds pointers are ignored rather than trapping:
// logging must not fail a call.
func (p *Plugin) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := int32(uint32(stack[0])), uint32(stack[1]), uint32(stack[2])
	dropped, ok := p.limiter.allow()
	if !ok {
		return
	}
	cut := n > maxLogLine
	b, ok := mod.Memory().Read(ptr, min(n, maxLogLine))
	if !ok {
		return
	}
	msg := strings.ToValidUTF8(string(b), string(utf8.RuneError))
	attrs := []slog.Attr{slog.String("source", "guest")}
	if cut {
		attrs = append(attrs, slog.Uint64("truncated_from", uint64(n)))
	}
	if dropped > 0 {
		attrs = append(attrs, slog.Uint64("dropped_before", dropped))
	}
	p.log().LogAttrs(ctx, guestLevel(level), msg, attrs...)
}

func guestLevel(l int32) slog.Level {
	switch l {
	case 0:
		return slog.LevelDebug
	case 2:
		return slog.LevelWarn
	case 3:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// logLimiter is a token bucket shared by the instances of one plugin
// version.
type logLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	tokens  float64
	last    time.Time
	dropped uint64
}

func newLogLimiter(now func() time.Time) *logLimiter {
	return &logLimiter{now: now, tokens: logBurst, last: now()}
}

// allow takes a token; it returns how many lines were dropped since the
// last allowed one.
func (l *logLimiter) allow() (dropped uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logRate)
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return 0, false
	}
	l.tokens--
	dropped, l.dropped = l.dropped, 0
	return dropped, true
}
