package lease

import (
	"context"

	"github.com/google/uuid"
	"github.com/lib/pq"
)

// addEvidence records documents as the turn's evidence, with the
// evidence of the turns that made the artifacts named, fenced by the
// lease token. The turn row is read FOR SHARE, so a re-claim that would
// fence this run either commits first (and nothing is written) or waits
// for this statement. Evidence only grows: a document already recorded
// is skipped, so a recovered attempt that re-admits adds nothing new.
const addEvidence = `
WITH owner AS (
  SELECT id, conversation_id FROM turns
  WHERE id = $1 AND conversation_id = $2 AND lease_token = $3 AND state = 'running' FOR SHARE),
docs AS (
  SELECT d AS document_id FROM unnest($4::uuid[]) d
  UNION
  SELECT ev.document_id FROM artifacts a
  JOIN turns s ON s.id = a.turn_id
  JOIN turn_evidence ev ON ev.conversation_id = s.conversation_id AND ev.turn_id = s.id
  WHERE a.id = ANY($5::uuid[])),
added AS (
  INSERT INTO turn_evidence (id, conversation_id, turn_id, document_id)
  SELECT gen_random_uuid(), o.conversation_id, o.id, d.document_id FROM owner o, docs d
  ON CONFLICT (conversation_id, turn_id, document_id) DO NOTHING)
SELECT EXISTS (SELECT 1 FROM owner)`

// EvidenceParams is what a run's turn is about to derive text from.
type EvidenceParams struct {
	Claim *Claimed
	// Documents are documents the turn was given or a tool returned, and
	// the evidence of the turns whose text it was given (history, the
	// room summary, a history search hit).
	Documents []uuid.UUID
	// Artifacts are artifacts given as the turn's input: the evidence of
	// the turns that made them becomes the turn's.
	Artifacts []uuid.UUID
}

// AddEvidence records what the claimed turn's text may derive from,
// before anything derived from it is journaled or given to the model:
// a viewer or a model context that may not read all of a turn's evidence
// does not get the turn (authority.TurnReadableSQL,
// TurnAudienceReadableSQL). A run that no longer owns the turn records
// nothing and gets ErrFenced.
func (s *Store) AddEvidence(ctx context.Context, p EvidenceParams) error {
	c := p.Claim
	if len(p.Documents) == 0 && len(p.Artifacts) == 0 {
		return nil
	}
	var owns bool
	err := queryRow(ctx, s.client, ErrFenced, "record evidence of", c.Turn.ID, addEvidence,
		[]any{c.Turn.ID, c.Turn.ConversationID, c.Fence.LeaseToken, ids(p.Documents), ids(p.Artifacts)}, &owns)
	if err != nil {
		return err
	}
	if !owns {
		return ErrFenced
	}
	return nil
}

// ids is a list of ids as a uuid[] parameter.
func ids(xs []uuid.UUID) pq.StringArray {
	out := make(pq.StringArray, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
