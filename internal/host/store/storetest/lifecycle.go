package storetest

import (
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var lifecycleTests = []test{
	{"PingBackend", testPingBackend},
	{"Close", testClose},
}

func testPingBackend(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	noErr(t, s.Ping(t.Context()), "Ping")
	if s.Backend() == "" {
		t.Error("Backend is empty")
	}
}

func testClose(t *testing.T, open Factory) {
	s := open(t, store.Hooks{})
	if s == nil {
		t.Fatal("factory returned a nil store")
	}
	noErr(t, s.Ping(t.Context()), "Ping")

	// Close ends subscriptions and releases the store.
	ch, err := s.SubscribeFacts(t.Context())
	noErr(t, err, "SubscribeFacts")
	noErr(t, s.Close(), "Close")
	closed := make(chan struct{})
	go func() {
		for range ch {
		}
		close(closed)
	}()
	waitDone(t, closed, "the fact subscription to close with the store")
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close: got nil, want an error")
	}
}
