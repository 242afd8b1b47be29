package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/pg"
)

// ReasonRecoveryExhausted ends a turn whose runs kept dying: after
// MaxAttempts attempts recovery writes this safe terminal instead of
// starting another.
const ReasonRecoveryExhausted = "recovery_exhausted"

// ErrNotRecoverable reports a turn that is not running with an expired
// lease (it is queued, finished, or its owner's lease is still live).
var ErrNotRecoverable = errors.New("turn is not recoverable: no expired running claim")

// recoverTurn fences an expired run and takes the turn over: a new lease
// token (the old owner's writes now fail), a new attempt. It lands only
// once the old lease has been expired for at least grace — zero when a
// freshly authorised client asks, one further lease period for the
// background salvage — so a dead-or-partitioned owner and its replacement
// never run the turn at once. The database clock decides.
const recoverTurn = `
UPDATE turns SET lease_token = lease_token + 1, lease_owner = $2,
  lease_expires_at = now() + make_interval(secs => $3), attempt = attempt + 1
WHERE id = $1 AND state = 'running' AND lease_expires_at < now() - make_interval(secs => $4)
RETURNING lease_token, lease_owner`

// Recover takes over a running turn whose lease expired at least grace ago,
// for owner, and appends the new attempt's turn_started. It returns
// ErrNotRecoverable when the turn is not in that state.
func Recover(ctx context.Context, client *ent.Client, hub *journal.Hub, turnID uuid.UUID, owner string, ttl, grace time.Duration) (*Claimed, error) {
	tx, err := client.Tx(ctx)
	if err != nil {
		return nil, fmt.Errorf("recover %s: begin: %w", turnID, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, recoverTurn, turnID, owner, ttl.Seconds(), grace.Seconds())
	if err != nil {
		return nil, fmt.Errorf("recover %s: %w", turnID, err)
	}
	var token int64
	var newOwner string
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&token, &newOwner); err != nil {
			rows.Close()
			return nil, err
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		return nil, fmt.Errorf("recover %s: %w", turnID, err)
	}
	if !found {
		return nil, ErrNotRecoverable
	}
	t, err := tx.Turn.Get(ctx, turnID)
	if err != nil {
		return nil, fmt.Errorf("recover %s: %w", turnID, err)
	}
	av, err := tx.AgentVersion.Get(ctx, t.AgentVersionID)
	if err != nil {
		return nil, fmt.Errorf("recover %s: agent version: %w", turnID, err)
	}
	fence := journal.Fence{TurnID: turnID, LeaseToken: token}
	entries, err := journal.Append(ctx, tx, t.ConversationID, &fence, journal.Draft{
		Kind: journal.KindTurnStarted, TurnID: uuid.NullUUID{UUID: turnID, Valid: true}, Attempt: t.Attempt,
		Payload: journal.RecoveredPayload{StartedPayload: journal.StartedPayload{Attempt: t.Attempt, AgentVersion: av.Version, Runner: owner}, Recovered: true},
	})
	if err != nil {
		return nil, fmt.Errorf("recover %s: %w", turnID, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("recover %s: commit: %w", turnID, err)
	}
	hub.Committed(t.ConversationID, entries[0].Seq)
	return &Claimed{Turn: t, Fence: fence}, nil
}

// expiredRuns lists running turns whose lease expired at least grace ago.
const expiredRuns = `
SELECT id FROM turns
WHERE state = 'running' AND lease_expires_at < now() - make_interval(secs => $1)
ORDER BY lease_expires_at LIMIT $2`

// salvage recovers the runs whose owners died without a client coming
// back for them: after one further lease period, any runner takes them.
func (r *Runner) salvage(ctx, runsCtx context.Context, freed chan<- struct{}) error {
	free := cap(r.slots) - len(r.slots)
	if free == 0 {
		return nil
	}
	ids, err := pg.QueryIDs(ctx, r.cfg.Client, expiredRuns, r.cfg.LeaseTTL.Seconds(), free)
	if err != nil {
		return fmt.Errorf("expired runs: %w", err)
	}
	for _, id := range ids {
		c, err := Recover(ctx, r.cfg.Client, r.cfg.Hub, id, r.cfg.Owner, r.cfg.LeaseTTL, r.cfg.LeaseTTL)
		if errors.Is(err, ErrNotRecoverable) {
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
	c, err := Recover(ctx, r.cfg.Client, r.cfg.Hub, turnID, r.cfg.Owner, r.cfg.LeaseTTL, 0)
	if errors.Is(err, ErrNotRecoverable) {
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

// activeLease reads the room's running turn and how long its lease has
// left by the database clock (negative once expired).
const activeLease = `
SELECT t.id, EXTRACT(EPOCH FROM (t.lease_expires_at - now()))
FROM conversations c JOIN turns t ON t.id = c.active_turn_id
WHERE c.id = $1 AND t.state = 'running'`

// Watch is what a freshly authorised client's presence does for a room:
// while ctx lives (the client's subscription), whenever the room's running
// turn has lost its lease, this runner recovers it at once. A page reload
// during the old lease's life only waits: recovery never reclaims before
// the lease has expired.
func (r *Runner) Watch(ctx context.Context, room uuid.UUID) {
	for {
		wake := r.cfg.Hub.Wait(room)
		wait := r.cfg.Poll
		rows, err := r.cfg.Client.QueryContext(ctx, activeLease, room)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("watching a room's lease failed", "room", room, "err", err)
			}
		} else {
			var id uuid.UUID
			var left float64
			found := false
			for rows.Next() {
				found = rows.Scan(&id, &left) == nil
			}
			rows.Close()
			if found && left < 0 {
				if _, err := r.Resume(ctx, id); err != nil && ctx.Err() == nil {
					r.log.Warn("resuming an expired run failed", "turn", id, "err", err)
				}
			} else if found {
				// Look again just after the lease would expire.
				wait = time.Duration(left*float64(time.Second)) + 50*time.Millisecond
			}
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
