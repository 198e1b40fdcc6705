package ratelimit

// Len is the number of keys a Memory holds.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.tat)
		s.mu.Unlock()
	}
	return n
}

const HealthKey = healthKey

// LeaseKeys is the number of keys a Redis limiter keeps lease state for.
func (r *Redis) LeaseKeys() int {
	n := 0
	for i := range r.leases.shards {
		s := &r.leases.shards[i]
		s.mu.Lock()
		n += len(s.keys)
		s.mu.Unlock()
	}
	return n
}

const LeaseTTL = leaseTTL

// PendingDecisions is the number of exact decisions waiting for a round
// trip.
func (r *Redis) PendingDecisions() int {
	return r.batch.Pending()
}

// ScriptHash is the SHA1 the limiter's script runs under.
func ScriptHash() string { return gcraScript.Hash() }
