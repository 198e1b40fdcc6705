package stream_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/teststore"
	tu "github.com/factline/factline/internal/testutil"
)

// signalHandler is a slog handler that signals each record whose message
// contains a text.
type signalHandler struct {
	want string
	seen chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.want) {
		select {
		case h.seen <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

// TestConsumerStartsOnceTheDatabaseIsReachable: a consumer started while
// its database is unreachable keeps trying, and once the database is back
// it delivers the facts recorded before and after, whether it reads alone
// or joins a group (as projections do).
func TestConsumerStartsOnceTheDatabaseIsReachable(t *testing.T) {
	t.Parallel()
	for _, grouped := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "group"}[grouped], func(t *testing.T) {
			t.Parallel()
			direct := tu.Postgres(t)
			u, err := url.Parse(direct)
			if err != nil {
				t.Fatal(err)
			}
			px := tu.NewProxy(t, u.Host)
			u.Host = px.Addr()
			q := u.Query()
			q.Set("connect_timeout", "2")
			u.RawQuery = q.Encode()
			writer := teststore.OpenAt(t, "postgres", direct)
			t.Cleanup(func() { writer.Close() })
			// The consumer's store opens (and migrates) while the path is up and
			// has not subscribed yet when it goes down.
			reader, err := postgres.Open(t.Context(), u.String(), postgres.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reader.Close() })
			appendN(t, writer, 3)

			px.SetDown(true)
			failed := &signalHandler{want: "cannot start", seen: make(chan struct{}, 1)}
			col := newCollector()
			c := &stream.Consumer{Name: "late", Store: reader, Handler: col.handle, Logger: slog.New(failed)}
			var g *stream.Group
			if grouped {
				g = &stream.Group{Store: reader, Logger: slog.New(slog.DiscardHandler)}
				runGroup(t, g)
				join(t, g, c)
			} else {
				run(t, c)
			}
			deadline := time.After(30 * time.Second)
			for range 2 { // two failed attempts: it retries rather than stopping
				select {
				case <-failed.seen:
				case <-deadline:
					t.Fatal("the consumer did not try to start twice")
				}
			}
			appendN(t, writer, 2)
			px.SetDown(false)
			col.waitFor(t, 5)
			if grouped {
				waitMembers(t, g, "late")
			}
			appendN(t, writer, 2)
			wantSequence(t, col.waitFor(t, 7), 1, 7)
		})
	}
}
