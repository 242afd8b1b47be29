package lease

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/pg"
)

// laneHeads: per room with no active turn, its queued turn with the lowest
// position.
const laneHeads = `
SELECT DISTINCT ON (t.conversation_id) t.id
FROM turns t JOIN conversations c ON c.id = t.conversation_id
WHERE t.state = 'queued' AND c.active_turn_id IS NULL
ORDER BY t.conversation_id, t.position
LIMIT $1`

// LaneHeadsParams bounds a look for claimable work.
type LaneHeadsParams struct {
	// Max is how many heads to return: the runner's free slots.
	Max int
}

// LaneHeads lists the queued turns that head the lanes of idle rooms.
func (s *Store) LaneHeads(ctx context.Context, p LaneHeadsParams) ([]uuid.UUID, error) {
	ids, err := pg.QueryIDs(ctx, s.client, laneHeads, p.Max)
	if err != nil {
		return nil, fmt.Errorf("lane heads: %w", err)
	}
	return ids, nil
}

// claimTurn moves the head of a lane to running. The NOT EXISTS keeps the
// lane first-in-first-out; the partial unique index on running turns keeps
// one running per room if anything else ever tried.
const claimTurn = `
UPDATE turns t SET state = 'running', lease_token = lease_token + 1, lease_owner = $2,
  lease_expires_at = now() + make_interval(secs => $3), attempt = attempt + 1,
  started_at = COALESCE(started_at, now())
WHERE t.id = $1 AND t.state = 'queued'
  AND NOT EXISTS (SELECT 1 FROM turns e WHERE e.conversation_id = t.conversation_id
                  AND e.state IN ('queued', 'running') AND e.position < t.position)
RETURNING lease_token`

// activateRoom marks the claimed turn as the room's one active turn, only
// if the room has none.
const activateRoom = `UPDATE conversations SET active_turn_id = $2 WHERE id = $1 AND active_turn_id IS NULL`

// ClaimParams names a lane head to claim.
type ClaimParams struct {
	TurnID uuid.UUID
	// Owner names the claiming runner in the lease.
	Owner string
	// TTL is how long the claim lasts without renewal.
	TTL time.Duration
}

// Claim takes a queued turn that heads its lane, for its owner, and appends
// turn_started. It returns ErrNotClaimable when the turn is not that.
func (s *Store) Claim(ctx context.Context, p ClaimParams) (*Claimed, error) {
	return s.startAttempt(ctx, "claim", p.TurnID, func(tx *ent.Tx) (*Claimed, int64, error) {
		var token int64
		if err := queryRow(ctx, tx, ErrNotClaimable, "claim", p.TurnID, claimTurn, []any{p.TurnID, p.Owner, p.TTL.Seconds()}, &token); err != nil {
			return nil, 0, err
		}
		t, err := tx.Turn.Get(ctx, p.TurnID)
		if err != nil {
			return nil, 0, fmt.Errorf("claim %s: %w", p.TurnID, err)
		}
		if err := exec(ctx, tx, ErrNotClaimable, "claim: activate room", p.TurnID, activateRoom, t.ConversationID, p.TurnID); err != nil {
			return nil, 0, err
		}
		// The bundle pinned the agent version at acceptance.
		var pinned struct {
			AgentVersion int `json:"agentVersion"`
		}
		if err := json.Unmarshal(t.AuthorityBundle, &pinned); err != nil {
			return nil, 0, fmt.Errorf("claim %s: authority bundle: %w", p.TurnID, err)
		}
		return appendStarted(ctx, tx, t, token, ErrNotClaimable, "claim",
			journal.StartedPayload{Attempt: t.Attempt, AgentVersion: pinned.AgentVersion, Runner: p.Owner})
	})
}

// startAttempt runs a transition that starts an attempt (a claim, a
// recovery) in a transaction of its own and, once it committed, wakes the
// room's readers and the runners at its turn_started entry.
func (s *Store) startAttempt(ctx context.Context, what string, turnID uuid.UUID, fn func(tx *ent.Tx) (*Claimed, int64, error)) (*Claimed, error) {
	var claimed *Claimed
	var head int64
	err := s.inTx(ctx, what, turnID, func(tx *ent.Tx) error {
		var err error
		claimed, head, err = fn(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.hub.Committed(claimed.Turn.ConversationID, head)
	return claimed, nil
}

// appendStarted journals a new attempt's turn_started, fenced by its new
// lease token, and returns the run's claim and the entry's position.
func appendStarted(ctx context.Context, tx pg.Querier, t *ent.Turn, token int64, miss error, what string, payload any) (*Claimed, int64, error) {
	fence := journal.Fence{TurnID: t.ID, LeaseToken: token}
	entries, err := journal.Append(ctx, tx, t.ConversationID, &fence, journal.Draft{
		Kind: journal.KindTurnStarted, TurnID: uuid.NullUUID{UUID: t.ID, Valid: true}, Attempt: t.Attempt, Payload: payload,
	})
	if err != nil {
		return nil, 0, interpretError(err, miss, what, t.ID)
	}
	return &Claimed{Turn: t, Fence: fence}, entries[0].Seq, nil
}

// claimAccepted is claimTurn and activateRoom in one statement, for the
// turn the accepting transaction just inserted. It runs after that
// transaction took the room's row lock, so its snapshot holds every
// acceptance committed before this one, and every later one waits: the
// guard is claimTurn's (no earlier turn of the room queued or running)
// with the room's lane free. The turn moves only if the room did, and the
// statement says whether each did.
const claimAccepted = `
WITH room AS (
  UPDATE conversations c SET active_turn_id = $1
  WHERE c.id = $4 AND c.active_turn_id IS NULL
    AND NOT EXISTS (SELECT 1 FROM turns e WHERE e.conversation_id = c.id
                    AND e.state IN ('queued', 'running') AND e.position < $5)
  RETURNING c.id
), claimed AS (
  UPDATE turns SET state = 'running', lease_token = lease_token + 1, lease_owner = $2,
    lease_expires_at = now() + make_interval(secs => $3), attempt = attempt + 1, started_at = now()
  WHERE id = $1 AND state = 'queued' AND EXISTS (SELECT 1 FROM room)
  RETURNING lease_token
)
SELECT EXISTS (SELECT 1 FROM room), (SELECT lease_token FROM claimed)`

// errNotStarted is a claim at acceptance whose turn_started the journal
// refused once the turn and the room had moved: unlike ErrNotClaimable,
// the transaction must not commit.
var errNotStarted = errors.New("claim at acceptance: turn_started refused")

// ClaimAcceptedParams names a turn accepted into an idle lane.
type ClaimAcceptedParams struct {
	// Turn is the turn as the accepting transaction inserted it.
	Turn *ent.Turn
	// AgentVersion is the version its bundle pinned.
	AgentVersion int
	Owner        string
	TTL          time.Duration
}

// ClaimAccepted claims a turn in the transaction that accepts it, which
// holds the room's row lock. The lane is first-in-first-out here as in
// Claim, decided by the claim's own statement under that lock: when an
// earlier turn of the room is queued or running, or the room has an
// active turn, it returns ErrNotClaimable having changed nothing, and tx
// may still commit the acceptance with the turn queued, for a runner's
// claim loop to take in order. Any other error leaves tx unable to
// commit. The caller commits, and then tells the hub (the claim's
// turn_started follows the turn_accepted entry at the next position).
func (s *Store) ClaimAccepted(ctx context.Context, tx *sql.Tx, p ClaimAcceptedParams) (*Claimed, error) {
	t := p.Turn
	var (
		activated bool
		token     sql.NullInt64
	)
	// Not interpretError: an index refusing this statement has aborted
	// the acceptance's transaction, which is no refusal to commit past.
	if err := tx.QueryRowContext(ctx, claimAccepted, t.ID, p.Owner, p.TTL.Seconds(), t.ConversationID, t.Position).Scan(&activated, &token); err != nil {
		return nil, fmt.Errorf("claim at acceptance %s: %w", t.ID, err)
	}
	if !activated {
		return nil, ErrNotClaimable
	}
	if !token.Valid {
		// The room was activated for a turn that was not queued: this
		// transaction's own insert says otherwise, so it must not commit.
		return nil, fmt.Errorf("claim at acceptance %s: the room was activated for a turn that is not queued", t.ID)
	}
	started := *t
	started.State, started.Attempt, started.LeaseToken = entturn.StateRunning, 1, token.Int64
	c, _, err := appendStarted(ctx, tx, &started, token.Int64, errNotStarted, "claim at acceptance",
		journal.StartedPayload{Attempt: 1, AgentVersion: p.AgentVersion, Runner: p.Owner})
	return c, err
}
