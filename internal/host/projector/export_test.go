package projector

// GroupMembers names the runtimes the shared stream reader feeds now, so
// tests wait for a join instead of sleeping.
func (s *Service) GroupMembers() []string { return s.group.Members() }
