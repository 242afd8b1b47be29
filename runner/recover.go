package runner

import (
	"context"
	"errors"
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
		c, err := r.store.Recover(ctx, lease.RecoverParams{TurnID: id, Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL, Grace: r.cfg.LeaseTTL})
		if errors.Is(err, lease.ErrNotRecoverable) {
			continue
		}
		if err != nil {
			return err
		}
		r.start(runsCtx, c, freed)
	}
	return nil
}

// Resume is the recovery a freshly authorised client asks for: when the
// turn's run has lost its lease (its owner died), this runner takes it
// over at once rather than after the salvage period. It reports whether it
// took the turn; a turn whose lease is still live is left to its owner.
func (r *Runner) Resume(ctx context.Context, turnID uuid.UUID) (bool, error) {
	r.mu.Lock()
	ready := r.started && !r.closed
	r.mu.Unlock()
	if !ready {
		return false, nil
	}
	c, err := r.store.Recover(ctx, lease.RecoverParams{TurnID: turnID, Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL})
	if errors.Is(err, lease.ErrNotRecoverable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// A full runner hands the turn back to its lane, where any runner
	// claims it at once.
	r.start(r.runsCtx, c, r.freed)
	return true, nil
}

// Watch is what a freshly authorised client's presence does for a room:
// while ctx lives (the client's subscription), whenever the room's running
// turn has lost its lease, this runner recovers it at once. A page reload
// during the old lease's life only waits: recovery never reclaims before
// the lease has expired.
func (r *Runner) Watch(ctx context.Context, room uuid.UUID) {
	for {
		wake := r.cfg.Hub.Wait(room)
		wait := r.cfg.Poll
		a, found, err := r.store.ActiveLease(ctx, room)
		switch {
		case err != nil:
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
