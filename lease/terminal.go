package lease

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/pg"
)

// TerminalParams is how a run ends its turn.
type TerminalParams struct {
	Fence journal.Fence
	// State is completed, failed or cancelled.
	State  entturn.State
	Reason string
	// Answer is committed with the terminal, when there is one.
	Answer *string
	// RenewFor, when set, is the run's owner: the terminal lands only
	// while that owner's lease is unexpired — the healthy completion's one
	// final renewal — so it is written with the same authority the run
	// held; otherwise it returns ErrLeaseLost.
	RenewFor string
	// Before are entries of the run (its last answer delta) that commit
	// with the terminal, ahead of the answer.
	Before []journal.Draft
	// Command is the member command this terminal carries out (a cancel),
	// marked delivered with the run's lease token in the same transaction.
	Command uuid.NullUUID
	// Usage is what the run spent, settled with the terminal. Nil settles
	// what the turn's last checkpoint recorded.
	Usage *outcome.Usage
	// Citations and Artifacts go with the answer.
	Citations []journal.AnswerCitation
	Artifacts []journal.AnswerArtifact
}

// noUsage is the usage of a turn that spent nothing.
const noUsage = `'{"inputTokens":0,"outputTokens":0,"modelCalls":0,"toolCalls":0}'::jsonb`

const finishTurn = `
UPDATE turns SET state = $3, terminal_reason = $4, answer = $5, finished_at = now(),
  lease_expires_at = NULL,
  usage = COALESCE($6::jsonb, checkpoint->'usage', ` + noUsage + `)
WHERE id = $1 AND lease_token = $2 AND state = 'running'
  AND ($7::text IS NULL OR (lease_owner = $7 AND lease_expires_at > now()))
RETURNING conversation_id, attempt, author_id`

// settleTurn releases the room, expires the turn's pending approvals (no
// decision can run an effect of an ended turn) and settles its pending
// commands: the one this terminal carries out is delivered, any other
// came too late and is rejected. It returns the steers it rejected,
// oldest first.
const settleTurn = `
WITH released AS (
  UPDATE conversations SET active_turn_id = NULL WHERE id = $1 AND active_turn_id = $2 RETURNING id),
expired AS (
  UPDATE approvals SET state = 'expired', decided_at = now() WHERE turn_id = $2 AND state = 'pending' RETURNING id),
settled AS (
  UPDATE commands SET
    state = CASE WHEN id = $3 THEN 'delivered' ELSE 'rejected' END,
    delivered_lease_token = CASE WHEN id = $3 THEN $4::bigint END,
    delivered_at = CASE WHEN id = $3 THEN now() END
  WHERE turn_id = $2 AND state = 'pending'
  RETURNING id, kind, state, actor_id, text, created_at)
SELECT id, actor_id, text FROM settled WHERE kind = 'steer' AND state = 'rejected' ORDER BY created_at, id`

// SettleParams is the settlement of a turn that is ending.
type SettleParams struct {
	Room, Turn uuid.UUID
	Attempt    int
	// Command is the command the terminal carries out (a cancel), marked
	// delivered with LeaseToken; every other pending command is rejected.
	Command    uuid.NullUUID
	LeaseToken any
	// Outcome and Reason are the turn's terminal, which the rejected
	// steers' entries name.
	Outcome entturn.State
	Reason  string
}

// Settle releases the room from the ending turn and settles the turn's
// pending commands, in the transaction that ends it. It returns a
// steer_rejected draft for each steer the turn ends without delivering,
// for the caller to journal ahead of the terminal: the steerer sees
// there, and on the command, that it was not applied and why.
func Settle(ctx context.Context, tx pg.Querier, p SettleParams) ([]journal.Draft, error) {
	rows, err := tx.QueryContext(ctx, settleTurn, p.Room, p.Turn, p.Command, p.LeaseToken)
	if err != nil {
		return nil, fmt.Errorf("settle turn %s: %w", p.Turn, err)
	}
	var drafts []journal.Draft
	for rows.Next() {
		var cmd, actor uuid.UUID
		var text sql.NullString
		if err := rows.Scan(&cmd, &actor, &text); err != nil {
			rows.Close()
			return nil, err
		}
		drafts = append(drafts, journal.Draft{
			Kind: journal.KindSteerRejected, TurnID: uuid.NullUUID{UUID: p.Turn, Valid: true}, Attempt: p.Attempt,
			ActorID: uuid.NullUUID{UUID: actor, Valid: true},
			Payload: journal.SteerRejectedPayload{CommandID: cmd, ActorID: actor, Text: text.String,
				Reason: journal.SteerRejectedTurnEnded, Outcome: p.Outcome.String(), TerminalReason: p.Reason},
		})
	}
	if err := pg.CloseRows(rows); err != nil {
		return nil, fmt.Errorf("settle turn %s: %w", p.Turn, err)
	}
	return drafts, nil
}

// Terminal ends the run holding the fence: the answer, the turn_terminal
// entry and the release of the room commit in one transaction, fenced by
// the lease token. A run that no longer owns the turn gets ErrFenced (or
// ErrLeaseLost, when RenewFor found its lease expired) and changes
// nothing; the journal's partial unique index allows one terminal per turn
// whatever races.
func (s *Store) Terminal(ctx context.Context, p TerminalParams) error {
	turnID := p.Fence.TurnID
	// The healthy completion's final renewal is a condition of the
	// terminal statement itself: it lands only while the run's lease is
	// unexpired, so it is written with the authority the run held.
	var owner any
	miss := ErrFenced
	if p.RenewFor != "" {
		owner, miss = p.RenewFor, ErrLeaseLost
	}
	var usage any // NULL: settle what the last checkpoint recorded
	if p.Usage != nil {
		raw, err := json.Marshal(p.Usage)
		if err != nil {
			return err
		}
		usage = string(raw)
	}
	var room uuid.UUID
	var head int64
	err := s.inTx(ctx, "terminal", turnID, func(tx *ent.Tx) error {
		var author uuid.UUID
		var attempt int
		if err := queryRow(ctx, tx, miss, "terminal", turnID, finishTurn,
			[]any{turnID, p.Fence.LeaseToken, string(p.State), p.Reason, p.Answer, usage, owner}, &room, &attempt, &author); err != nil {
			return err
		}
		if p.Answer != nil {
			published, err := stillMember(ctx, tx, room, author, turnID)
			if err != nil {
				return fmt.Errorf("terminal %s: %w", turnID, err)
			}
			if !published {
				p = TerminalParams{Fence: p.Fence, State: entturn.StateFailed, Reason: outcome.ReasonMembershipRevoked}
			}
		}
		if p.Answer != nil && len(p.Citations) > 0 {
			// Under the room's row lock stillMember took: the audience the
			// answer reaches is the one checked here.
			if err := withholdForAudience(ctx, tx, room, turnID, &p); err != nil {
				return fmt.Errorf("terminal %s: %w", turnID, err)
			}
		}
		nullTurn := uuid.NullUUID{UUID: turnID, Valid: true}
		var drafts []journal.Draft
		if p.Answer != nil {
			// A refused publication drops its deltas too.
			drafts = append(drafts, p.Before...)
			drafts = append(drafts, journal.Draft{Kind: journal.KindTurnAnswer, TurnID: nullTurn, Attempt: attempt,
				Payload: journal.AnswerPayload{Text: *p.Answer, Citations: nonNil(p.Citations), Artifacts: nonNil(p.Artifacts)}})
		}
		rejected, err := Settle(ctx, tx, SettleParams{Room: room, Turn: turnID, Attempt: attempt,
			Command: p.Command, LeaseToken: p.Fence.LeaseToken, Outcome: p.State, Reason: p.Reason})
		if err != nil {
			return err
		}
		drafts = append(drafts, rejected...)
		drafts = append(drafts, journal.Draft{Kind: journal.KindTurnTerminal, TurnID: nullTurn, Attempt: attempt,
			Payload: journal.TerminalPayload{Outcome: string(p.State), Reason: p.Reason}})
		// The turn row now holds our update, which is the fence: the
		// append itself needs none.
		entries, err := journal.Append(ctx, tx, room, nil, drafts...)
		if err != nil {
			return interpretError(err, ErrFenced, "terminal", turnID)
		}
		head = entries[len(entries)-1].Seq
		return nil
	})
	if err != nil {
		return err
	}
	s.hub.Committed(room, head)
	s.metrics.Ended(string(p.State), p.Reason)
	return nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// stillMember re-checks, before an answer is published, that its author is
// still in the room. It first takes the room's row lock — the lock a
// membership change takes — and only then reads membership in a statement
// of its own, so a removal either committed before the read (and is seen)
// or waits for this publication to commit. A removed author's answer is
// refused: the turn is marked failed (membership_revoked) and its answer
// is not stored, and stillMember reports false.
func stillMember(ctx context.Context, tx pg.Querier, room, author, turnID uuid.UUID) (bool, error) {
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, room); err != nil {
		return false, err
	}
	member, err := authority.IsMember(ctx, tx, room, author)
	if err != nil {
		return false, err
	}
	if member {
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE turns SET state = 'failed', terminal_reason = $2, answer = NULL WHERE id = $1`,
		turnID, outcome.ReasonMembershipRevoked); err != nil {
		return false, err
	}
	return false, nil
}

const renewLease = `
UPDATE turns SET lease_expires_at = now() + make_interval(secs => $4)
WHERE id = $1 AND lease_token = $2 AND lease_owner = $3 AND state = 'running' AND lease_expires_at > now()`

// RenewParams names the lease a run renews.
type RenewParams struct {
	Fence journal.Fence
	Owner string
	TTL   float64 // seconds
}

// Renew extends the lease of the run holding the fence. It extends only an
// unexpired running claim: a lease that has already expired stays expired
// even if this renewal arrives late, and the run gets ErrLeaseLost.
func (s *Store) Renew(ctx context.Context, p RenewParams) error {
	return exec(ctx, s.client, ErrLeaseLost, "renew lease of", p.Fence.TurnID, renewLease, p.Fence.TurnID, p.Fence.LeaseToken, p.Owner, p.TTL)
}

const releaseTurn = `
UPDATE turns SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_token = $2 AND state = 'running'
RETURNING conversation_id`

// releaseRoom frees the room the released or ended turn held.
const releaseRoom = `UPDATE conversations SET active_turn_id = NULL WHERE id = $1 AND active_turn_id = $2`

// ReleaseParams names the run handing its turn back.
type ReleaseParams struct {
	Fence journal.Fence
}

// Release hands a running turn back to its lane without an outcome, fenced
// by the lease token: a stopping runner is not member intent, so the turn
// stays non-terminal and another runner takes it over at once.
func (s *Store) Release(ctx context.Context, p ReleaseParams) error {
	turnID := p.Fence.TurnID
	var room uuid.UUID
	err := s.inTx(ctx, "release", turnID, func(tx *ent.Tx) error {
		if err := queryRow(ctx, tx, ErrFenced, "release", turnID, releaseTurn, []any{turnID, p.Fence.LeaseToken}, &room); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, releaseRoom, room, turnID); err != nil {
			return fmt.Errorf("release %s: %w", turnID, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.hub.Committed(room, 0)
	return nil
}

// cancelQueued ends a turn that has not started: no lease exists, so the
// queued state is the fence.
const cancelQueued = `
UPDATE turns SET state = 'cancelled', terminal_reason = $2, finished_at = now(),
  usage = COALESCE(checkpoint->'usage', ` + noUsage + `)
WHERE id = $1 AND state = 'queued'
RETURNING conversation_id`

// CancelQueuedParams names a turn a member cancels before it started.
type CancelQueuedParams struct {
	TurnID uuid.UUID
}

// CancelQueued ends a queued turn cancelled, inside the caller's
// transaction (which journals the terminal and settles the command), and
// returns its room. A turn no longer queued is ErrNotClaimable: its run's
// owner carries the cancel out.
func (s *Store) CancelQueued(ctx context.Context, tx pg.Querier, p CancelQueuedParams) (uuid.UUID, error) {
	var room uuid.UUID
	err := queryRow(ctx, tx, ErrNotClaimable, "cancel", p.TurnID, cancelQueued, []any{p.TurnID, outcome.ReasonCancelled}, &room)
	return room, err
}

// Revoked counts n turns ended by a membership's removal, after the
// transaction that ended them (Revoke) committed.
func (s *Store) Revoked(n int) {
	for range n {
		s.metrics.Ended(entturn.StateFailed.String(), outcome.ReasonMembershipRevoked)
	}
}

// lockAuthorTurns locks an author's unfinished turns in a room, turn rows
// first as the lock order has it.
const lockAuthorTurns = `
SELECT id FROM turns WHERE conversation_id = $1 AND author_id = $2 AND state IN ('queued', 'running')
ORDER BY position FOR UPDATE`

// revokeTurns ends an author's unfinished turns in a room: failed,
// membership_revoked, without an answer. A run of one is fenced from its
// next write on: its turn is no longer running.
const revokeTurns = `
UPDATE turns SET state = 'failed', terminal_reason = $3, answer = NULL, finished_at = now(),
  lease_expires_at = NULL,
  usage = COALESCE(checkpoint->'usage', ` + noUsage + `)
WHERE conversation_id = $1 AND author_id = $2 AND state IN ('queued', 'running')
RETURNING id, attempt`

// RevokeParams names an author being removed from a room.
type RevokeParams struct {
	Room, Author uuid.UUID
}

// LockAuthorTurns locks Author's queued and running turns in Room, in the
// transaction that will remove the author, before it locks the room's row:
// turn rows first, as the lock order has it. (A turn accepted between this
// and the room's lock is locked by Revoke; a claim of it in that moment
// can deadlock with the removal, which Postgres breaks — see the doc.)
func (s *Store) LockAuthorTurns(ctx context.Context, tx pg.Querier, p RevokeParams) error {
	if _, err := pg.QueryIDs(ctx, tx, lockAuthorTurns, p.Room, p.Author); err != nil {
		return fmt.Errorf("lock the turns of %s in %s: %w", p.Author, p.Room, err)
	}
	return nil
}

// Revoke ends, in the transaction removing Author from Room (after the
// removal's member_left entry), each of the author's queued or running
// turns there: failed membership_revoked with no answer, its terminal
// journaled, the room's lane released, its pending commands rejected —
// the same settlement a run's own terminal makes. After the removal
// commits, no entry of those turns but their terminals can be appended:
// their runs' fenced writes find them no longer running. It returns the
// last journal position written, or 0, and how many turns it ended (the
// caller counts them once its transaction commits: see Revoked).
func (s *Store) Revoke(ctx context.Context, tx pg.Querier, p RevokeParams) (int64, int, error) {
	rows, err := tx.QueryContext(ctx, revokeTurns, p.Room, p.Author, outcome.ReasonMembershipRevoked)
	if err != nil {
		return 0, 0, fmt.Errorf("revoke the turns of %s in %s: %w", p.Author, p.Room, err)
	}
	type ended struct {
		id      uuid.UUID
		attempt int
	}
	var turns []ended
	for rows.Next() {
		var e ended
		if err := rows.Scan(&e.id, &e.attempt); err != nil {
			rows.Close()
			return 0, 0, err
		}
		turns = append(turns, e)
	}
	if err := pg.CloseRows(rows); err != nil {
		return 0, 0, fmt.Errorf("revoke the turns of %s in %s: %w", p.Author, p.Room, err)
	}
	var head int64
	for _, t := range turns {
		drafts, err := Settle(ctx, tx, SettleParams{Room: p.Room, Turn: t.id, Attempt: t.attempt,
			Outcome: entturn.StateFailed, Reason: outcome.ReasonMembershipRevoked})
		if err != nil {
			return 0, 0, err
		}
		drafts = append(drafts, journal.Draft{
			Kind: journal.KindTurnTerminal, TurnID: uuid.NullUUID{UUID: t.id, Valid: true}, Attempt: t.attempt,
			Payload: journal.TerminalPayload{Outcome: entturn.StateFailed.String(), Reason: outcome.ReasonMembershipRevoked},
		})
		entries, err := journal.Append(ctx, tx, p.Room, nil, drafts...)
		if err != nil {
			return 0, 0, fmt.Errorf("revoke turn %s: %w", t.id, err)
		}
		head = entries[len(entries)-1].Seq
	}
	return head, len(turns), nil
}

// unreadableByAudience lists, for a shared room ($1), the cited documents
// ($2) that not every current member may read now; for a private room,
// none (its member's own reads were checked at each call).
var unreadableByAudience = `
SELECT COALESCE(ARRAY(SELECT d FROM unnest($2::uuid[]) d WHERE NOT ` + authority.AudienceReadableSQL("d", "$1") + `), '{}')
FROM conversations c WHERE c.id = $1 AND c.kind = 'shared'`

// withholdForAudience re-checks, at publication, the documents an answer
// in a shared room cites against the room's audience now: the tools read
// what every member could read at each call, but a member may have joined
// since. If the audience may not read one of them, the answer is withheld
// (outcome.WithheldAnswer, outcome.ReasonAudienceWithheld), its held-back delta dropped,
// and only the citations the audience may read are kept.
func withholdForAudience(ctx context.Context, tx pg.Querier, room, turnID uuid.UUID, p *TerminalParams) error {
	var docs []string
	for _, c := range p.Citations {
		if c.Document != uuid.Nil {
			docs = append(docs, c.Document.String())
		}
	}
	if len(docs) == 0 {
		return nil
	}
	var unreadable pq.StringArray
	err := pg.QueryRow(ctx, tx, unreadableByAudience, []any{room, pq.StringArray(docs)}, &unreadable)
	if errors.Is(err, sql.ErrNoRows) || err == nil && len(unreadable) == 0 {
		return nil // a private room, or an audience that may read them all
	}
	if err != nil {
		return fmt.Errorf("audience check: %w", err)
	}
	kept := p.Citations[:0:0]
	for _, c := range p.Citations {
		if c.Document == uuid.Nil || !slices.Contains(unreadable, c.Document.String()) {
			kept = append(kept, c)
		}
	}
	answer := outcome.WithheldAnswer
	p.Answer, p.Citations, p.Before, p.Reason = &answer, kept, nil, outcome.ReasonAudienceWithheld
	if _, err := tx.ExecContext(ctx, `UPDATE turns SET answer = $2, terminal_reason = $3 WHERE id = $1`, turnID, answer, outcome.ReasonAudienceWithheld); err != nil {
		return fmt.Errorf("withhold the answer: %w", err)
	}
	return nil
}
