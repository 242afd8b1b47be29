package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/lease"
)

// salvage recovers the runs whose owners died without a client coming
// back for them: after one further lease period, any runner takes them.
func (r *Runner) salvage(ctx, runsCtx context.Context, freed chan<- struct{}) error {
	free := cap(r.slots) - len(r.slots)
	if free == 0 {
		return nil
	}
	ids, err := r.store.Expired(ctx, lease.ExpiredParams{Grace: r.cfg.LeaseTTL, Max: free})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := r.recoverInSlot(ctx, runsCtx, lease.RecoverParams{TurnID: id, Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL, Grace: r.cfg.LeaseTTL}, freed); err != nil {
			return err
		}
	}
	return nil
}

// recoverInSlot takes a turn over only into a slot reserved first: a
// runner that is full, stopping, or still running that very turn (its
// own run, paused past its lease and not yet aware) recovers nothing, so
// a takeover is never handed back to the lane to cost a second attempt.
// It reports whether it took the turn.
func (r *Runner) recoverInSlot(ctx, runsCtx context.Context, p lease.RecoverParams, freed chan<- struct{}) (bool, error) {
	if !r.reserve(p.TurnID) {
		return r.supersede(ctx, runsCtx, p, freed)
	}
	c, err := r.store.Recover(ctx, p)
	if err != nil {
		r.unreserve(p.TurnID, freed)
		if errors.Is(err, lease.ErrNotRecoverable) {
			return false, nil
		}
		return false, err
	}
	go func() {
		defer r.unreserve(c.Turn.ID, freed)
		r.run(runsCtx, c)
	}()
	return true, nil
}

// Resume is the recovery a freshly authorised client asks for: when the
// turn's run has lost its lease (its owner died), this runner takes it
// over at once rather than after the salvage period, if it has a slot
// free for it. It reports whether it took the turn; a turn whose lease is
// still live is left to its owner.
func (r *Runner) Resume(ctx context.Context, turnID uuid.UUID) (bool, error) {
	r.mu.Lock()
	ready := r.started && !r.closed
	r.mu.Unlock()
	if !ready {
		return false, nil
	}
	return r.recoverInSlot(ctx, r.runsCtx, lease.RecoverParams{TurnID: turnID, Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL}, r.freed)
}

// Watch is what a freshly authorised client's presence does for a room:
// while ctx lives (the client's subscription), whenever the room's running
// turn has lost its lease, this runner recovers it at once. A page reload
// during the old lease's life only waits: recovery never reclaims before
// the lease has expired.
//
// The watch is shared: one watcher per room per runner, however many
// subscriptions watch the room, running while any of them does; Watch
// returns when ctx ends (and, for the last watcher of the room, once the
// shared one has stopped). Idle subscribers so cost the database one
// lease query per room, not one each.
func (r *Runner) Watch(ctx context.Context, room uuid.UUID) {
	release := r.Hold(ctx, room)
	<-ctx.Done()
	release()
}

// Hold is Watch without a goroutine of its own: the room's shared
// watcher runs until release is called (once) by every holder; the last
// release waits for it to stop. ctx's values (not its end) reach the
// watcher.
func (r *Runner) Hold(ctx context.Context, room uuid.UUID) (release func()) {
	r.wmu.Lock()
	w := r.watchers[room]
	if w == nil {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		w = &roomWatch{cancel: cancel, done: make(chan struct{})}
		r.watchers[room] = w
		go func() {
			defer close(w.done)
			r.watchRoom(wctx, room)
		}()
	}
	w.refs++
	r.wmu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.wmu.Lock()
			w.refs--
			last := w.refs == 0
			if last {
				delete(r.watchers, room)
				w.cancel()
			}
			r.wmu.Unlock()
			if last {
				<-w.done
			}
		})
	}
}

// idleWatch is how long a room's lease watcher waits, with no run in the
// room, before it looks again unwoken: a belt over the braces of the
// hub's head poll, long enough that idle watched rooms cost next to
// nothing (100 rooms: one query every 3 s).
const idleWatch = 5 * time.Minute

// roomWatch is a room's shared lease watcher and how many watch with it.
type roomWatch struct {
	refs   int
	cancel context.CancelFunc
	done   chan struct{}
}

// watchRoom is the shared watcher's loop.
func (r *Runner) watchRoom(ctx context.Context, room uuid.UUID) {
	for {
		wake := r.cfg.Hub.Wait(room)
		// With no run in the room, only the journal moving (a claim
		// journals turn_started; the hub wakes the room, its poll
		// catching a lost notification) can change that: look again
		// then, or after idleWatch. Idle rooms so cost next to no query
		// of their own.
		wait := idleWatch
		a, found, err := r.store.ActiveLease(ctx, room)
		switch {
		case err != nil:
			wait = r.cfg.Poll
			if ctx.Err() == nil {
				r.log.Warn("watching a room's lease failed", "room", room, "err", err)
			}
		case found && a.Left < 0:
			if _, err := r.Resume(ctx, a.TurnID); err != nil && ctx.Err() == nil {
				r.log.Warn("resuming an expired run failed", "turn", a.TurnID, "err", err)
			}
		case found:
			// Look again just after the lease would expire.
			wait = a.Left + 50*time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// supersede takes over a turn whose run in this very runner outlived its
// lease (the process was paused past it, say) and does not know yet: the
// recovery fences that run, which is then stopped without recording
// anything, and the new attempt runs in the slot it gives back — one
// takeover, one attempt. A runner with no run of the turn (it is full, or
// stopping) recovers nothing.
func (r *Runner) supersede(ctx, runsCtx context.Context, p lease.RecoverParams, freed chan<- struct{}) (bool, error) {
	r.mu.Lock()
	own := r.active[p.TurnID]
	r.mu.Unlock()
	if own == nil {
		return false, nil
	}
	c, err := r.store.Recover(ctx, p)
	if errors.Is(err, lease.ErrNotRecoverable) {
		return false, nil // its lease is live: the run goes on
	}
	if err != nil {
		return false, err
	}
	own.cancel(errSuperseded)
	select {
	case <-own.done:
	case <-ctx.Done():
	}
	if !r.reserve(p.TurnID) {
		// Stopping, or the slot went to another turn meanwhile: hand the
		// turn back to its lane, for any runner.
		if err := r.store.Release(context.Background(), lease.ReleaseParams{Fence: c.Fence}); err != nil && !errors.Is(err, lease.ErrFenced) {
			r.log.Warn("handing back a takeover", "turn", p.TurnID, "err", err)
		}
		return false, nil
	}
	go func() {
		defer r.unreserve(c.Turn.ID, freed)
		r.run(runsCtx, c)
	}()
	return true, nil
}
