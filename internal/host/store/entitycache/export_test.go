package entitycache

// QueueLen is how many items the shards' orders of insertion hold,
// stale ones included.
func QueueLen(c *Cache) int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.order) - s.head
		s.mu.Unlock()
	}
	return n
}
