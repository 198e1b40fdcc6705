package sqlite

// WatchLooks returns how many looks at the data version the Store's entity
// watches have completed.
func (s *Store) WatchLooks() int64 { return s.watch.looks.Load() }
