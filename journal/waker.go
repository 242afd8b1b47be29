package journal

import (
	"sync"

	"github.com/google/uuid"
)

// waker wakes the waiters of a key once: Wait returns a channel that the
// next wake of its key (or wakeAll) closes. Waking never blocks.
type waker struct {
	mu    sync.Mutex
	chans map[uuid.UUID]chan struct{}
}

func (w *waker) wait(key uuid.UUID) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.chans == nil {
		w.chans = make(map[uuid.UUID]chan struct{})
	}
	ch, ok := w.chans[key]
	if !ok {
		ch = make(chan struct{})
		w.chans[key] = ch
	}
	return ch
}

func (w *waker) wake(key uuid.UUID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.chans[key]; ok {
		close(ch)
		delete(w.chans, key)
	}
}

// keys are the keys with waiters.
func (w *waker) keys() []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]uuid.UUID, 0, len(w.chans))
	for k := range w.chans {
		out = append(out, k)
	}
	return out
}

func (w *waker) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, ch := range w.chans {
		close(ch)
		delete(w.chans, key)
	}
}

// Commands is the turn-command waker: it wakes the run that owns a turn
// when a member command (a steer, a cancel) for it is stored, on any
// replica. It is not the journal's: commands are rows of their own, not
// entries. It shares the hub's one notification channel and LISTEN
// connection, so a replica holds one connection for both.
type Commands struct {
	waiters waker

	mu      sync.Mutex
	pending map[uuid.UUID]bool // turns whose commands are not yet NOTIFYed
	kick    func()
}

// Wait returns a channel that is closed the next time a member command for
// the turn is stored, on any replica (or on a poll tick or listener
// reconnect). Take it before reading the commands.
func (c *Commands) Wait(turn uuid.UUID) <-chan struct{} { return c.waiters.wait(turn) }

// Stored reports that a command for the turn was committed: it wakes this
// replica's watchers of the turn at once and schedules a debounced NOTIFY
// for the others.
func (c *Commands) Stored(turn uuid.UUID) {
	c.waiters.wake(turn)
	c.mu.Lock()
	c.pending[turn] = true
	c.mu.Unlock()
	c.kick()
}

// takePending returns the turns to NOTIFY and forgets them.
func (c *Commands) takePending() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	turns := make([]uuid.UUID, 0, len(c.pending))
	for turn := range c.pending {
		turns = append(turns, turn)
	}
	c.pending = make(map[uuid.UUID]bool)
	return turns
}
