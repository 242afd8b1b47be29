package turn

// SetTakeHooks installs hooks run by each acceptance attempt after the
// idempotency key's lookup, before and after the room's row is locked,
// and when an attempt the database rolled back is run again.
func SetTakeHooks(s *Service, before, after func(), retrying func(error)) {
	s.beforeTake, s.afterTake, s.retrying = before, after, retrying
}
