package main_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMAnswersRequestsOnIdleConnections: a rolling deploy sends
// SIGTERM while a load balancer still routes requests over idle keep-alive
// connections. Every request whose bytes were written before the signal
// is answered (a 201 append is stored), under load, round after round of
// the real binary.
func TestSIGTERMAnswersRequestsOnIdleConnections(t *testing.T) {
	const rounds, idle, loaders = 3, 30, 4
	dataDir := newStore(t)
	key, stderr, code := cli(t, nil, "keys", "create", "--tenant", "acme", "--mode", "live", "--data-dir", dataDir)
	key = strings.TrimSpace(key)
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	var stored []string
	for round := range rounds {
		s := startServer(t, "--data-dir", dataDir)
		s.waitReady(t)
		ent := "acct-" + strconv.Itoa(round)
		if code, body := s.do(t, "POST", "/v1/entities", key, `{"type":"account","id":"`+ent+`","name":"A","status":"active","subtype":"customer"}`); code != 201 {
			t.Fatalf("create %d %v", code, body)
		}
		addr := strings.TrimPrefix(s.base, "http://")

		// Idle keep-alive connections, each served once.
		conns := make([]net.Conn, idle)
		readers := make([]*bufio.Reader, idle)
		for i := range conns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			conns[i], readers[i] = c, bufio.NewReader(c)
			io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(readers[i], nil)
			if err != nil {
				t.Fatalf("round %d: warm-up: %v", round, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}

		// Load on other connections until the process is gone.
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
					resp, err := client.Get(s.base + "/v1/entities/" + ent + "?entity_type=account")
					if err != nil {
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}

		// Every idle connection gets a complete request; SIGTERM follows the
		// last write at once.
		var wrote sync.WaitGroup
		for _, c := range conns {
			wrote.Add(1)
			go func() {
				defer wrote.Done()
				body := `{"entity_id":"` + ent + `","type":"deposit","data":{"amount":1}}`
				io.WriteString(c, "POST /v1/facts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: "+key+
					"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			}()
		}
		wrote.Wait()
		s.cmd.Process.Signal(syscall.SIGTERM)

		for i := range conns {
			resp, err := http.ReadResponse(readers[i], nil)
			if err != nil {
				t.Fatalf("round %d: connection %d: request written before SIGTERM got no answer: %v", round, i, err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 201 {
				t.Fatalf("round %d: connection %d: %d %s %v", round, i, resp.StatusCode, raw, err)
			}
			var env struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(raw, &env); err != nil || env.Data.ID == "" {
				t.Fatalf("round %d: connection %d: %s", round, i, raw)
			}
			stored = append(stored, env.Data.ID)
		}
		select {
		case err := <-s.exited:
			if err != nil {
				t.Fatalf("round %d: serve exited with %v after SIGTERM\n%s", round, err, s.stderr)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: serve did not stop within 30 s of SIGTERM", round)
		}
		close(stopLoad)
		load.Wait()
	}

	// Every acknowledged append is there after a restart.
	s := startServer(t, "--data-dir", dataDir)
	defer s.stop(t)
	s.waitReady(t)
	for _, id := range stored {
		if code, body := s.do(t, "GET", "/v1/facts/"+id, key, ""); code != 200 {
			t.Fatalf("acknowledged fact %s: %d %v", id, code, body)
		}
	}
}
