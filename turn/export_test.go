package turn

// SetTakeHooks installs hooks run by each acceptance attempt once the
// room's row is locked, and when an attempt the database rolled back is
// run again.
func SetTakeHooks(s *Service, after func(), retrying func(error)) {
	s.afterTake, s.retrying = after, retrying
}
