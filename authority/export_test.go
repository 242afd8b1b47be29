package authority

// Waiting is how many envelopes wait for a read of the set.
func (s *KeySet) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}
