package turn

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// storedCheckpoint is what a turn's checkpoint column holds: the
// controller's state, and the usage the backend counted up to it.
type storedCheckpoint struct {
	State runtime.Checkpoint `json:"state"`
	Usage Usage              `json:"usage"`
	// Evidence and Artifacts are what the turn's tools gathered and made
	// up to the checkpoint: an answer of a replacement attempt may cite
	// and reference them.
	Evidence  []tools.Citation         `json:"evidence,omitempty"`
	Artifacts []journal.AnswerArtifact `json:"artifacts,omitempty"`
}

const saveCheckpoint = `
UPDATE turns SET checkpoint = $3 WHERE id = $1 AND lease_token = $2 AND state = 'running'`

// Checkpoint stores the run's progress on the turn, fenced by the lease
// token: a run that no longer owns the turn writes nothing. A compaction
// is journaled with it.
func (h *callbackHost) Checkpoint(ctx context.Context, cp runtime.Checkpoint) error {
	if err := h.check(cp.Run); err != nil {
		return err
	}
	h.mu.Lock()
	stored := storedCheckpoint{State: cp, Usage: h.usage, Artifacts: h.artifacts}
	for _, id := range h.evidence.IDs() {
		stored.Evidence = append(stored.Evidence, h.lineage[id])
	}
	h.mu.Unlock()
	raw, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	c := h.claim
	tx, err := h.r.cfg.Client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, saveCheckpoint, c.Turn.ID, c.Fence.LeaseToken, string(raw))
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", c.Turn.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return ErrFenced
	}
	drafts := h.takeHeld()
	if comp := cp.Compaction; comp != nil {
		drafts = append(drafts, journal.Draft{Kind: journal.KindCompaction, TurnID: h.turnID(), Attempt: c.Turn.Attempt,
			Payload: journal.CompactionPayload{Summarised: comp.Summarised, TokensBefore: comp.TokensBefore, TokensAfter: comp.TokensAfter}})
	}
	drafts = append(drafts, journal.Draft{Kind: journal.KindCheckpoint, TurnID: h.turnID(), Attempt: c.Turn.Attempt,
		Payload: journal.CheckpointPayload{Steps: cp.Steps, ToolCalls: cp.ToolCalls, Messages: len(cp.Messages)}})
	entries, err := journal.Append(ctx, tx, c.Turn.ConversationID, &c.Fence, drafts...)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	h.r.cfg.Hub.Committed(c.Turn.ConversationID, entries[len(entries)-1].Seq)
	return nil
}

// claimSteers claims the steer commands waiting for the turn and journals
// their delivery in one statement, fenced by the lease token: the turn row
// is read FOR SHARE, so a re-claim that would fence this run either
// commits first (and nothing is claimed) or waits for this statement.
// Nothing waiting costs one indexed read.
const claimSteers = `
WITH owner AS (
  SELECT 1 FROM turns WHERE id = $1 AND lease_token = $2 AND state = 'running' FOR SHARE),
claimed AS (
  UPDATE commands SET state = 'delivered', delivered_lease_token = $2, delivered_at = now()
  WHERE turn_id = $1 AND kind = 'steer' AND state = 'pending' AND EXISTS (SELECT 1 FROM owner)
  RETURNING id, actor_id, text, created_at),
head AS (
  UPDATE conversations SET next_seq = next_seq + (SELECT count(*) FROM claimed)
  WHERE id = $3 AND EXISTS (SELECT 1 FROM claimed)
  RETURNING next_seq - (SELECT count(*) FROM claimed) AS base),
entries AS (
  INSERT INTO journal_entries (conversation_id, seq, kind, turn_id, attempt, actor_id, payload)
  SELECT $3, head.base + c.n, 'steer_delivered', $1, $4, c.actor_id,
         jsonb_build_object('commandId', c.id, 'actorId', c.actor_id, 'text', c.text)
  FROM head, (SELECT *, row_number() OVER (ORDER BY created_at, id) AS n FROM claimed) c
  RETURNING seq)
SELECT EXISTS (SELECT 1 FROM owner), c.id, c.text, (SELECT max(seq) FROM entries)
FROM (SELECT 1) AS one LEFT JOIN claimed c ON true ORDER BY c.created_at, c.id`

// Steering claims the steer commands waiting for the turn and journals
// their delivery (steer_delivered), atomically and fenced by the lease
// token: only the run that owns the turn delivers, each command once.
func (h *callbackHost) Steering(ctx context.Context, run runtime.RunRef) ([]runtime.Steer, error) {
	if err := h.check(run); err != nil {
		return nil, err
	}
	// Text a previous step held back goes out ahead of the deliveries.
	if err := h.flushHeld(ctx); err != nil {
		return nil, err
	}
	c := h.claim
	rows, err := h.r.cfg.Client.QueryContext(ctx, claimSteers, c.Turn.ID, c.Fence.LeaseToken, c.Turn.ConversationID, c.Turn.Attempt)
	if err != nil {
		return nil, fmt.Errorf("steering %s: %w", c.Turn.ID, err)
	}
	defer rows.Close()
	var steers []runtime.Steer
	owns := false
	var head sql.NullInt64
	for rows.Next() {
		var id uuid.NullUUID
		var text sql.NullString
		if err := rows.Scan(&owns, &id, &text, &head); err != nil {
			return nil, err
		}
		if id.Valid {
			steers = append(steers, runtime.Steer{ID: id.UUID.String(), Text: text.String})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("steering %s: %w", c.Turn.ID, err)
	}
	if !owns {
		return nil, ErrFenced
	}
	if len(steers) > 0 {
		h.r.cfg.Hub.Committed(c.Turn.ConversationID, head.Int64)
	}
	return steers, nil
}

const deliveredSteers = `
SELECT id, text FROM commands
WHERE turn_id = $1 AND kind = 'steer' AND state = 'delivered' AND delivered_lease_token < $2
ORDER BY delivered_at, created_at, id`

// resume gives a replacement attempt what its predecessors left: the last
// checkpoint, the usage counted up to it, and steering an earlier attempt
// claimed after that checkpoint (delivered once, in the journal; applied
// by whichever attempt finishes the turn).
func (h *callbackHost) resume(ctx context.Context, contract *runtime.Contract) error {
	t := h.claim.Turn
	applied := []string{}
	if len(t.Checkpoint) > 0 {
		var sc storedCheckpoint
		if err := json.Unmarshal(t.Checkpoint, &sc); err != nil {
			return fmt.Errorf("decode checkpoint of %s: %w", t.ID, err)
		}
		state := sc.State
		state.Run = contract.Run
		contract.Resume = &state
		h.usage = sc.Usage
		h.remember(sc.Evidence)
		h.artifacts = sc.Artifacts
		applied = state.Steers
	}
	if t.Attempt <= 1 {
		return nil
	}
	rows, err := h.r.cfg.Client.QueryContext(ctx, deliveredSteers, t.ID, h.claim.Fence.LeaseToken)
	if err != nil {
		return fmt.Errorf("steering of %s: %w", t.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var s runtime.Steer
		if err := rows.Scan(&s.ID, &s.Text); err != nil {
			return err
		}
		if !slices.Contains(applied, s.ID) {
			contract.Steering = append(contract.Steering, s)
		}
	}
	return rows.Err()
}
