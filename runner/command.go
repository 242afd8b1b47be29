package runner

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/lease"
)

// errCancelRequested is the cause of a run's cancellation by a durable,
// authorised cancel command — the only thing that aborts a runtime.
type errCancelRequested struct{ command uuid.UUID }

func (e errCancelRequested) Error() string { return "cancelled by command " + e.command.String() }

// checkCommands looks for a pending cancel of the turn once: one cancels
// the run with that command as its cause. It reports whether it did.
// (Steering is claimed by the run itself, at each step boundary.)
func (r *Runner) checkCommands(ctx context.Context, c *lease.Claimed, cancel context.CancelCauseFunc) bool {
	id, ok, err := r.store.PendingCancel(ctx, c.Turn.ID)
	if err != nil || !ok {
		return false // on an error, the next wake-up or tick looks again
	}
	cancel(errCancelRequested{command: id})
	return true
}

// watchCommands delivers member commands to the run it serves. It looks
// when a command for the turn is stored on any replica (the hub's command
// wake-up, taken as wake before the run's first look) and on the runner's
// poll tick.
func (r *Runner) watchCommands(ctx context.Context, c *lease.Claimed, cancel context.CancelCauseFunc, wake <-chan struct{}) {
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		}
		wake = r.cfg.Hub.Commands().Wait(c.Turn.ID)
		if r.checkCommands(ctx, c, cancel) {
			return
		}
	}
}
