package turn

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/ent/approval"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/pg"
)

// Approvals lists a turn's approvals, oldest first. It does not authorise:
// callers show them only to whoever may see the turn (Visible).
func (s *Service) Approvals(ctx context.Context, turnID uuid.UUID) ([]*ent.Approval, error) {
	as, err := s.Client.Approval.Query().
		Where(approval.TurnID(turnID)).
		Order(ent.Asc(approval.FieldCreatedAt), ent.Asc(approval.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("approvals of turn %s: %w", turnID, err)
	}
	return as, nil
}

// Answer reads the payload of a turn's turn_answer entry: its text,
// citations and artifacts; the zero payload when the turn has none (it has
// not answered, or its answer was refused).
func (s *Service) Answer(ctx context.Context, turnID uuid.UUID) (journal.AnswerPayload, error) {
	entries, err := journal.ReadTurn(ctx, s.Client, turnID, 0, 1, journal.KindTurnAnswer)
	if err != nil || len(entries) == 0 {
		return journal.AnswerPayload{}, err
	}
	var p journal.AnswerPayload
	if err := json.Unmarshal(entries[0].Payload, &p); err != nil {
		return journal.AnswerPayload{}, fmt.Errorf("decode the answer of turn %s: %w", turnID, err)
	}
	return p, nil
}

// Withheld returns which of turns completed with their answer withheld
// from the room's audience (lease.ReasonAudienceWithheld).
func (s *Service) Withheld(ctx context.Context, turns []uuid.UUID) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	if len(turns) == 0 {
		return out, nil
	}
	strs := make([]string, len(turns))
	for i, id := range turns {
		strs[i] = id.String()
	}
	ids, err := pg.QueryIDs(ctx, s.Client, `SELECT id FROM turns WHERE id = ANY($1::uuid[]) AND terminal_reason = $2`,
		"{"+strings.Join(strs, ",")+"}", lease.ReasonAudienceWithheld)
	if err != nil {
		return nil, fmt.Errorf("withheld turns: %w", err)
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
