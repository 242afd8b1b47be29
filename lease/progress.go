package lease

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
)

const saveCheckpoint = `
UPDATE turns SET checkpoint = $3 WHERE id = $1 AND lease_token = $2 AND state = 'running'`

// CheckpointParams is a run's progress to store on its turn.
type CheckpointParams struct {
	Claim *Claimed
	// Checkpoint is the stored form of the run's state (JSON).
	Checkpoint []byte
	// Drafts are journaled with it (held text, a compaction, the
	// checkpoint entry itself).
	Drafts []journal.Draft
	// Summary, when set, becomes the room's summary, unless the room has
	// one of a later position for the same audience already.
	Summary *RoomSummary
}

// RoomSummary is a room's durable compaction: the summary of its finished
// turns through the turn at Through, covering Turns turns.
type RoomSummary struct {
	Through int64
	Turns   int64
	Text    string
	// Audience is the room's audience version the summarised history was
	// built for, and Evidence every document that history derived from:
	// a later run starts from the summary only while the room's audience
	// is still that one and may read them all.
	Audience int64
	Evidence []uuid.UUID
}

// saveSummary keeps a room's summary, moving only forward within one
// audience: an older position than the stored one of the same audience
// version changes nothing, while a stored summary no run of the room
// would start from any more — of another (an earlier) audience version,
// or drawing on a document a current member may no longer read — is
// replaced whatever its position. A summary built for an audience the
// room no longer has is not written at all: no run would start from it.
var saveSummary = `
INSERT INTO room_summaries (id, conversation_id, through_position, summary, turns, turn_id, audience_version, evidence, updated_at)
SELECT $1, c.id, $3, $4, $5, $6, $7, $8::jsonb, now()
FROM conversations c WHERE c.id = $2 AND c.audience_version = $7
ON CONFLICT (conversation_id) DO UPDATE
SET through_position = EXCLUDED.through_position, summary = EXCLUDED.summary, turns = EXCLUDED.turns,
    turn_id = EXCLUDED.turn_id, audience_version = EXCLUDED.audience_version, evidence = EXCLUDED.evidence,
    updated_at = now()
WHERE room_summaries.through_position < EXCLUDED.through_position
   OR room_summaries.audience_version <> EXCLUDED.audience_version
   OR NOT ` + authority.EvidenceAudienceReadableSQL("room_summaries.evidence", "room_summaries.conversation_id")

// Checkpoint stores the run's progress on the turn and journals drafts
// with it, fenced by the lease token: a run that no longer owns the turn
// writes nothing and gets ErrFenced.
func (s *Store) Checkpoint(ctx context.Context, p CheckpointParams) error {
	c := p.Claim
	var head int64
	err := s.inTx(ctx, "checkpoint", c.Turn.ID, func(tx *ent.Tx) error {
		if err := exec(ctx, tx, ErrFenced, "checkpoint", c.Turn.ID, saveCheckpoint, c.Turn.ID, c.Fence.LeaseToken, string(p.Checkpoint)); err != nil {
			return err
		}
		entries, err := journal.Append(ctx, tx, c.Turn.ConversationID, &c.Fence, p.Drafts...)
		if err != nil {
			return interpretError(err, ErrFenced, "checkpoint", c.Turn.ID)
		}
		if len(entries) > 0 {
			head = entries[len(entries)-1].Seq
		}
		if sm := p.Summary; sm != nil {
			evidence, err := json.Marshal(nonNil(sm.Evidence))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, saveSummary, uuid.New(), c.Turn.ConversationID, sm.Through, sm.Text, sm.Turns, c.Turn.ID,
				sm.Audience, string(evidence)); err != nil {
				return interpretError(err, ErrFenced, "checkpoint", c.Turn.ID)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.hub.Committed(c.Turn.ConversationID, head)
	return nil
}

// claimSteers claims the steer commands waiting for the turn and journals
// their delivery in one statement, fenced by the lease token: the turn row
// is read FOR SHARE, so a re-claim that would fence this run either
// commits first (and nothing is claimed) or waits for this statement.
// Nothing waiting costs one indexed read.
var claimSteers = `
WITH owner AS (
  SELECT 1 FROM turns WHERE id = $1 AND lease_token = $2 AND state = 'running' FOR SHARE),
claimed AS (
  UPDATE commands SET state = 'delivered', delivered_lease_token = $2, delivered_at = now()
  WHERE turn_id = $1 AND kind = 'steer' AND state = 'pending' AND EXISTS (SELECT 1 FROM owner)
  RETURNING id, actor_id, text, created_at),
head AS (` + journal.TakePositions("$3", "(SELECT count(*) FROM claimed)", "EXISTS (SELECT 1 FROM claimed)") + `),
entries AS (
  INSERT INTO journal_entries (conversation_id, seq, kind, turn_id, attempt, actor_id, payload)
  SELECT $3, head.base + c.n, 'steer_delivered', $1, $4, c.actor_id,
         jsonb_build_object('commandId', c.id, 'actorId', c.actor_id, 'text', c.text)
  FROM head, (SELECT *, row_number() OVER (ORDER BY created_at, id) AS n FROM claimed) c
  RETURNING seq)
SELECT EXISTS (SELECT 1 FROM owner), c.id, c.text, (SELECT max(seq) FROM entries)
FROM (SELECT 1) AS one LEFT JOIN claimed c ON true ORDER BY c.created_at, c.id`

// Steer is a steering instruction delivered to a run.
type Steer struct {
	ID   uuid.UUID
	Text string
}

// ClaimSteers claims the steer commands waiting for the claimed turn and
// journals their delivery (steer_delivered), atomically and fenced by the
// lease token: only the run that owns the turn delivers, each command
// once. A run that no longer owns the turn gets ErrFenced.
func (s *Store) ClaimSteers(ctx context.Context, c *Claimed) ([]Steer, error) {
	rows, err := s.client.QueryContext(ctx, claimSteers, c.Turn.ID, c.Fence.LeaseToken, c.Turn.ConversationID, c.Turn.Attempt)
	if err != nil {
		return nil, interpretError(err, ErrFenced, "steering", c.Turn.ID)
	}
	defer rows.Close()
	var steers []Steer
	owns := false
	var head sql.NullInt64
	for rows.Next() {
		var id uuid.NullUUID
		var text sql.NullString
		if err := rows.Scan(&owns, &id, &text, &head); err != nil {
			return nil, fmt.Errorf("steering %s: %w", c.Turn.ID, err)
		}
		if id.Valid {
			steers = append(steers, Steer{ID: id.UUID, Text: text.String})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err, ErrFenced, "steering", c.Turn.ID)
	}
	if !owns {
		return nil, ErrFenced
	}
	if len(steers) > 0 {
		s.hub.Committed(c.Turn.ConversationID, head.Int64)
	}
	return steers, nil
}

const deliveredSteers = `
SELECT id, text FROM commands
WHERE turn_id = $1 AND kind = 'steer' AND state = 'delivered' AND delivered_lease_token < $2
ORDER BY delivered_at, created_at, id`

// DeliveredSteers lists the steering earlier attempts of the claimed turn
// claimed, in delivery order: a replacement attempt applies what its
// predecessors' checkpoints had not.
func (s *Store) DeliveredSteers(ctx context.Context, c *Claimed) ([]Steer, error) {
	rows, err := s.client.QueryContext(ctx, deliveredSteers, c.Turn.ID, c.Fence.LeaseToken)
	if err != nil {
		return nil, fmt.Errorf("steering of %s: %w", c.Turn.ID, err)
	}
	defer rows.Close()
	var out []Steer
	for rows.Next() {
		var st Steer
		if err := rows.Scan(&st.ID, &st.Text); err != nil {
			return nil, fmt.Errorf("steering of %s: %w", c.Turn.ID, err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("steering of %s: %w", c.Turn.ID, err)
	}
	return out, nil
}
