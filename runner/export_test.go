package runner

import "github.com/google/uuid"

// Watching is how many subscriptions share room's lease watcher, and
// how many watchers the runner runs in all.
func (r *Runner) Watching(room uuid.UUID) (refs, watchers int) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if w := r.watchers[room]; w != nil {
		refs = w.refs
	}
	return refs, len(r.watchers)
}

// Claiming reports whether the runner holds a slot reserved for turn id.
func (r *Runner) Claiming(id uuid.UUID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.claiming[id]
}
