package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/testutil"
)

// TestShutdownClosesSilentConnections: a connection that never sends a
// byte (a client's spare connection) does not hold a shutdown until the
// read timeout, while a request already arriving is still answered.
func TestShutdownClosesSilentConnections(t *testing.T) {
	h := setup(t, "sqlite")
	gateway.SetSilentGrace(h.srv, 300*time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ln) }()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	silent := dial()
	// A keep-alive connection that served one request and is idle.
	idle := dial()
	if _, err := io.WriteString(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// A request whose headers are still arriving when the shutdown starts.
	slow := dial()
	if _, err := io.WriteString(slow, "GET /health HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the server to read the first bytes", func() bool {
		return gateway.SpokenConns(h.srv) == 2 // idle and slow
	})

	// The server's read timeout is 30 s; the shutdown is given 10.
	start := time.Now()
	shut := make(chan error, 1)
	go func() { shut <- h.srv.Shutdown(10 * time.Second) }()
	// The shutdown closes the silent connection while the slow request is
	// still arriving.
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent connection not closed by the shutdown: %d %v", n, err)
	}
	if _, err := io.WriteString(slow, "\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatalf("the request in flight was dropped: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "status") {
		t.Fatalf("request in flight: %d %s", resp.StatusCode, body)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("shutdown still waiting on a connection that never sent a byte")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// TestShutdownAnswersRequestsOnIdleConnections: a request written to an
// idle keep-alive connection just before a shutdown (SIGTERM) begins is
// answered, not reset, and a write answered 201 is stored. Many idle
// connections, under load from other clients, over several rounds: the
// loss it guards against was a race of a millisecond.
func TestShutdownAnswersRequestsOnIdleConnections(t *testing.T) {
	const rounds, idle, loaders = 6, 40, 4
	for round := range rounds {
		h := setup(t, "sqlite")
		// The load's clients may leave spare connections unused.
		gateway.SetSilentGrace(h.srv, 300*time.Millisecond)
		ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).body["data"].(map[string]any)["id"])
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- h.srv.Serve(ln) }()
		addr := ln.Addr().String()

		// Idle keep-alive connections: each has been served once.
		conns := make([]net.Conn, idle)
		readers := make([]*bufio.Reader, idle)
		for i := range conns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			conns[i], readers[i] = c, bufio.NewReader(c)
			io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(readers[i], nil)
			if err != nil {
				t.Fatalf("round %d: warm-up: %v", round, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}

		// Load: clients keep requesting on their own connections until the
		// server stops answering.
		stopLoad := make(chan struct{})
		var load sync.WaitGroup
		for range loaders {
			load.Add(1)
			go func() {
				defer load.Done()
				client := &http.Client{Timeout: 5 * time.Second}
				for {
					select {
					case <-stopLoad:
						return
					default:
					}
					resp, err := client.Get("http://" + addr + "/health")
					if err != nil {
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}

		// Every idle connection gets a complete request; the shutdown
		// starts as soon as the last is written.
		var wrote sync.WaitGroup
		for i, c := range conns {
			wrote.Add(1)
			go func() {
				defer wrote.Done()
				if i%2 == 0 {
					io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
					return
				}
				body := `{"entity_id":"` + ent + `","type":"deposit","data":{"amount":1}}`
				io.WriteString(c, "POST /v1/facts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: "+h.keyA+
					"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			}()
		}
		wrote.Wait()
		shut := make(chan error, 1)
		go func() { shut <- h.srv.Shutdown(15 * time.Second) }()

		var facts []string
		for i := range conns {
			resp, err := http.ReadResponse(readers[i], nil)
			if err != nil {
				t.Fatalf("round %d: connection %d: request written before the shutdown got no answer: %v", round, i, err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("round %d: connection %d: truncated answer: %v", round, i, err)
			}
			want := 200
			if i%2 == 1 {
				want = 201
			}
			if resp.StatusCode != want {
				t.Fatalf("round %d: connection %d: %d %s", round, i, resp.StatusCode, raw)
			}
			if want == 201 {
				var env struct {
					Data struct {
						ID string `json:"id"`
					} `json:"data"`
				}
				if err := json.Unmarshal(raw, &env); err != nil || env.Data.ID == "" {
					t.Fatalf("round %d: connection %d: %s", round, i, raw)
				}
				facts = append(facts, env.Data.ID)
			}
		}
		select {
		case err := <-shut:
			if err != nil {
				t.Fatalf("round %d: shutdown: %v", round, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: shutdown did not finish", round)
		}
		close(stopLoad)
		load.Wait()
		if err := <-served; err != nil {
			t.Fatalf("round %d: serve: %v", round, err)
		}
		for _, id := range facts {
			if _, err := h.store.GetFact(context.Background(), "tenant-a", id); err != nil {
				t.Fatalf("round %d: fact %s answered 201 but not stored: %v", round, id, err)
			}
		}
	}
}

// TestShutdownStopsRequestsTheDrainDidNotFinish: a request still waiting
// (on a lock, on the database) when the shutdown's drain runs out is
// stopped then: it answers 503 with Connection: close before Shutdown
// returns, while what it holds can still be released. It ran on to its
// own 30 s deadline, after the process had closed the store under it,
// and answered 500.
func TestShutdownStopsRequestsTheDrainDidNotFinish(t *testing.T) {
	h := setup(t, "sqlite")
	entered := make(chan struct{})
	h.srv.Mount(openapi.Endpoint{Method: "GET", Path: "/v1/blocked", ID: "blocked", Access: openapi.AnyKey, Status: 200, OK: "."},
		func(c *fiber.Ctx) error {
			close(entered)
			<-c.UserContext().Done()
			return fmt.Errorf("waiting for a lock: %w", c.UserContext().Err())
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ln) }()
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/blocked", nil)
		req.Header.Set("X-API-Key", h.keyA)
		resp, err := http.DefaultClient.Do(req)
		answered <- answer{resp, err}
	}()
	<-entered
	start := time.Now()
	err = h.srv.Shutdown(200 * time.Millisecond)
	if err == nil {
		t.Fatal("Shutdown reported a drain that finished")
	}
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("the stopped request was not answered: %v", a.err)
		}
		body, _ := io.ReadAll(a.resp.Body)
		a.resp.Body.Close()
		if a.resp.StatusCode != http.StatusServiceUnavailable || !a.resp.Close || !strings.Contains(string(body), "shutting down") {
			t.Fatalf("stopped request: %d close=%v %s", a.resp.StatusCode, a.resp.Close, body)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the request was still unanswered %v after the shutdown began", time.Since(start))
	}
	<-served
}
