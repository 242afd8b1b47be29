package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/pg"
)

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
RETURNING lease_token`

// RecoverParams names a running turn whose lease may have expired.
type RecoverParams struct {
	TurnID uuid.UUID
	Owner  string
	TTL    time.Duration
	// Grace is how long the old lease must have been expired.
	Grace time.Duration
}

// Recover takes over a running turn whose lease expired at least grace ago,
// for its owner, and appends the new attempt's turn_started. It returns
// ErrNotRecoverable when the turn is not in that state.
func (s *Store) Recover(ctx context.Context, p RecoverParams) (*Claimed, error) {
	return s.startAttempt(ctx, "recover", p.TurnID, func(tx *ent.Tx) (*Claimed, int64, error) {
		var token int64
		if err := queryRow(ctx, tx, ErrNotRecoverable, "recover", p.TurnID, recoverTurn,
			[]any{p.TurnID, p.Owner, p.TTL.Seconds(), p.Grace.Seconds()}, &token); err != nil {
			return nil, 0, err
		}
		t, err := tx.Turn.Get(ctx, p.TurnID)
		if err != nil {
			return nil, 0, fmt.Errorf("recover %s: %w", p.TurnID, err)
		}
		av, err := tx.AgentVersion.Get(ctx, t.AgentVersionID)
		if err != nil {
			return nil, 0, fmt.Errorf("recover %s: agent version: %w", p.TurnID, err)
		}
		return appendStarted(ctx, tx, t, token, ErrNotRecoverable, "recover", journal.RecoveredPayload{
			StartedPayload: journal.StartedPayload{Attempt: t.Attempt, AgentVersion: av.Version, Runner: p.Owner},
			Recovered:      true,
		})
	})
}

// expiredRuns lists running turns whose lease expired at least grace ago.
const expiredRuns = `
SELECT id FROM turns
WHERE state = 'running' AND lease_expires_at < now() - make_interval(secs => $1)
ORDER BY lease_expires_at LIMIT $2`

// ExpiredParams bounds a look for runs whose owners died.
type ExpiredParams struct {
	Grace time.Duration
	Max   int
}

// Expired lists running turns whose lease expired at least grace ago,
// longest expired first.
func (s *Store) Expired(ctx context.Context, p ExpiredParams) ([]uuid.UUID, error) {
	ids, err := pg.QueryIDs(ctx, s.client, expiredRuns, p.Grace.Seconds(), p.Max)
	if err != nil {
		return nil, fmt.Errorf("expired runs: %w", err)
	}
	return ids, nil
}

// activeLease reads the room's running turn and how long its lease has
// left by the database clock (negative once expired).
const activeLease = `
SELECT t.id, EXTRACT(EPOCH FROM (t.lease_expires_at - now()))
FROM conversations c JOIN turns t ON t.id = c.active_turn_id
WHERE c.id = $1 AND t.state = 'running'`

// ActiveLease is a room's running turn and what its lease has left.
type ActiveLease struct {
	TurnID uuid.UUID
	// Left is negative once the lease has expired.
	Left time.Duration
}

// ActiveLease reads the room's running turn, and reports false when the
// room runs none.
func (s *Store) ActiveLease(ctx context.Context, room uuid.UUID) (ActiveLease, bool, error) {
	var a ActiveLease
	var left float64
	err := pg.QueryRow(ctx, s.client, activeLease, []any{room}, &a.TurnID, &left)
	if err := interpretError(err, errNone, "active lease of room", room); err != nil {
		if err == errNone {
			return ActiveLease{}, false, nil
		}
		return ActiveLease{}, false, err
	}
	a.Left = time.Duration(left * float64(time.Second))
	return a, true, nil
}
