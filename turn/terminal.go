package turn

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/pg"
)

// Outcome is how a turn ends.
type Outcome struct {
	State  string // completed | failed | cancelled
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
	Usage *Usage
	// Citations and Artifacts go with the answer.
	Citations []journal.AnswerCitation
	Artifacts []journal.AnswerArtifact
}

// Usage is what a turn spent over all its attempts' recorded work.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	ModelCalls   int `json:"modelCalls"`
	ToolCalls    int `json:"toolCalls"`
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

// settleTurn releases the room and settles the turn's pending commands:
// the one this terminal carries out is delivered, any other came too late
// and is rejected.
const settleTurn = `
WITH released AS (
  UPDATE conversations SET active_turn_id = NULL WHERE id = $1 AND active_turn_id = $2 RETURNING id)
UPDATE commands SET
  state = CASE WHEN id = $3 THEN 'delivered' ELSE 'rejected' END,
  delivered_lease_token = CASE WHEN id = $3 THEN $4::bigint END,
  delivered_at = CASE WHEN id = $3 THEN now() END
WHERE turn_id = $2 AND state = 'pending'`

// ReasonMembershipRevoked ends a turn whose author left the room before its
// answer was published.
const ReasonMembershipRevoked = "membership_revoked"

// CommitTerminal ends the run holding fence: the answer, the turn_terminal
// entry and the release of the room commit in one transaction, fenced by
// the lease token. A run that no longer owns the turn gets ErrFenced and
// changes nothing; the journal's partial unique index allows one terminal
// per turn whatever races.
func CommitTerminal(ctx context.Context, client *ent.Client, hub *journal.Hub, fence journal.Fence, out Outcome) error {
	tx, err := client.Tx(ctx)
	if err != nil {
		return fmt.Errorf("terminal %s: begin: %w", fence.TurnID, err)
	}
	defer tx.Rollback()

	// The healthy completion's final renewal is a condition of the
	// terminal statement itself: it lands only while the run's lease is
	// unexpired, so it is written with the authority the run held.
	var owner any
	if out.RenewFor != "" {
		owner = out.RenewFor
	}
	var usage any // NULL: settle what the last checkpoint recorded
	if out.Usage != nil {
		raw, err := json.Marshal(out.Usage)
		if err != nil {
			return err
		}
		usage = string(raw)
	}
	rows, err := tx.QueryContext(ctx, finishTurn, fence.TurnID, fence.LeaseToken, out.State, out.Reason, out.Answer, usage, owner)
	if err != nil {
		return fmt.Errorf("terminal %s: %w", fence.TurnID, err)
	}
	var room, author uuid.UUID
	var attempt int
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&room, &attempt, &author); err != nil {
			rows.Close()
			return err
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		return fmt.Errorf("terminal %s: %w", fence.TurnID, err)
	}
	if !found {
		if owner != nil {
			return ErrLeaseLost
		}
		return ErrFenced
	}
	if out.Answer != nil {
		if out, err = checkAudience(ctx, tx, room, author, fence.TurnID, out); err != nil {
			return fmt.Errorf("terminal %s: %w", fence.TurnID, err)
		}
	}

	turnID := uuid.NullUUID{UUID: fence.TurnID, Valid: true}
	var drafts []journal.Draft
	if out.Answer != nil {
		// A refused publication (checkAudience) drops its deltas too.
		drafts = append(drafts, out.Before...)
		drafts = append(drafts, journal.Draft{Kind: journal.KindTurnAnswer, TurnID: turnID, Attempt: attempt,
			Payload: journal.AnswerPayload{Text: *out.Answer, Citations: nonNil(out.Citations), Artifacts: nonNil(out.Artifacts)}})
	}
	drafts = append(drafts, journal.Draft{Kind: journal.KindTurnTerminal, TurnID: turnID, Attempt: attempt,
		Payload: journal.TerminalPayload{Outcome: out.State, Reason: out.Reason}})
	// The turn row now holds our update, which is the fence: the append
	// itself needs none.
	entries, err := journal.Append(ctx, tx, room, nil, drafts...)
	if err != nil {
		return fmt.Errorf("terminal %s: %w", fence.TurnID, err)
	}
	if _, err := tx.ExecContext(ctx, settleTurn, room, fence.TurnID, out.Command, fence.LeaseToken); err != nil {
		return fmt.Errorf("terminal %s: release room and settle commands: %w", fence.TurnID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("terminal %s: commit: %w", fence.TurnID, err)
	}
	hub.Committed(room, entries[len(entries)-1].Seq)
	return nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// checkAudience re-checks, before an answer is published, that its author
// is still in the room. It first takes the room's row lock — the lock a
// membership change takes — and only then reads membership in a statement
// of its own, so a removal either committed before the read (and is seen)
// or waits for this publication to commit. A removed author's answer is
// refused: the turn ends failed and the answer is not stored.
func checkAudience(ctx context.Context, tx pg.Querier, room, author, turnID uuid.UUID, out Outcome) (Outcome, error) {
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, room); err != nil {
		return out, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT EXISTS (SELECT 1 FROM room_members WHERE conversation_id = $1 AND member_id = $2)`, room, author)
	if err != nil {
		return out, err
	}
	member := false
	for rows.Next() {
		if err := rows.Scan(&member); err != nil {
			rows.Close()
			return out, err
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		return out, err
	}
	if member {
		return out, nil
	}
	refused := Outcome{State: "failed", Reason: ReasonMembershipRevoked}
	if _, err := tx.ExecContext(ctx, `UPDATE turns SET state = 'failed', terminal_reason = $2, answer = NULL WHERE id = $1`,
		turnID, refused.Reason); err != nil {
		return out, err
	}
	return refused, nil
}

const renewLease = `
UPDATE turns SET lease_expires_at = now() + make_interval(secs => $4)
WHERE id = $1 AND lease_token = $2 AND lease_owner = $3 AND state = 'running' AND lease_expires_at > now()`

// Renew extends the lease of the run holding fence. It extends only an
// unexpired running claim: a lease that has already expired stays expired
// even if this renewal arrives late, and the run gets ErrLeaseLost.
func Renew(ctx context.Context, q pg.Querier, fence journal.Fence, owner string, ttlSeconds float64) error {
	res, err := q.ExecContext(ctx, renewLease, fence.TurnID, fence.LeaseToken, owner, ttlSeconds)
	if err != nil {
		return fmt.Errorf("renew lease of %s: %w", fence.TurnID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

const releaseTurn = `
UPDATE turns SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_token = $2 AND state = 'running'
RETURNING conversation_id`

// Release hands a running turn back to its lane without an outcome, fenced
// by the lease token: a stopping runner is not member intent, so the turn
// stays non-terminal and another runner takes it over at once.
func Release(ctx context.Context, client *ent.Client, hub *journal.Hub, fence journal.Fence) error {
	tx, err := client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, releaseTurn, fence.TurnID, fence.LeaseToken)
	if err != nil {
		return fmt.Errorf("release %s: %w", fence.TurnID, err)
	}
	var room uuid.UUID
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&room); err != nil {
			rows.Close()
			return err
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		return fmt.Errorf("release %s: %w", fence.TurnID, err)
	}
	if !found {
		return ErrFenced
	}
	if _, err := tx.ExecContext(ctx, `UPDATE conversations SET active_turn_id = NULL WHERE id = $1 AND active_turn_id = $2`, room, fence.TurnID); err != nil {
		return fmt.Errorf("release %s: %w", fence.TurnID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("release %s: commit: %w", fence.TurnID, err)
	}
	hub.Committed(room, 0)
	return nil
}
