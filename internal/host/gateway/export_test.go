package gateway

import "time"

// SetSilentGrace shortens how long Shutdown waits for connections that
// have sent nothing.
func SetSilentGrace(s *Server, d time.Duration) { s.silentGrace = d }
