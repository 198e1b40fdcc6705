package gateway

import "time"

// SetSilentGrace shortens how long Shutdown waits for connections that
// have sent nothing.
func SetSilentGrace(s *Server, d time.Duration) { s.silentGrace = d }

// SpokenConns counts the open connections the server has read bytes from,
// so a test knows a request has begun to arrive.
func SpokenConns(s *Server) int {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	n := 0
	for c := range s.conns.conns {
		if c.spoken.Load() {
			n++
		}
	}
	return n
}
