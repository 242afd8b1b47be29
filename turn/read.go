package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/ent/approval"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/journal"
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

// VisibleApproval returns an approval when viewer may see its turn (a
// current member of its room, Visible), with that turn; anyone else gets
// the NOT_FOUND an approval that does not exist gets.
func (s *Service) VisibleApproval(ctx context.Context, viewer authority.Member, id uuid.UUID) (*ent.Approval, *ent.Turn, error) {
	a, err := s.Client.Approval.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, nil, errcode.New(errcode.NotFound, "approval not found")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get approval %s: %w", id, err)
	}
	t, err := s.Visible(ctx, viewer, a.TurnID)
	if errors.Is(err, errcode.ErrNotFound) {
		return nil, nil, errcode.New(errcode.NotFound, "approval not found")
	}
	if err != nil {
		return nil, nil, err
	}
	return a, t, nil
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

// ModelCall is one stored model call of a turn (turn replay).
type ModelCall struct {
	Attempt, Step             int64
	Purpose, Route            string
	Request                   gateway.StoredRequest
	Response                  gateway.StoredResponse
	InputTokens, OutputTokens int64
	DurationMs                int64
	Error                     string
	At                        time.Time
}

// ModelCalls reads the first `first` stored model calls of a turn, in
// order (attempt, then step). The caller has checked that the reader may
// see the turn.
func (s *Service) ModelCalls(ctx context.Context, turnID uuid.UUID, first int) ([]ModelCall, error) {
	stored, err := s.store().ModelCalls(ctx, turnID, first)
	if err != nil {
		return nil, err
	}
	out := make([]ModelCall, 0, len(stored))
	for _, sc := range stored {
		c := ModelCall{Attempt: sc.Attempt, Step: sc.Step, Purpose: sc.Purpose, Route: sc.Route, InputTokens: sc.InputTokens,
			OutputTokens: sc.OutputTokens, DurationMs: sc.DurationMs, Error: sc.Error, At: sc.At}
		if err := json.Unmarshal(sc.Request, &c.Request); err != nil {
			return nil, fmt.Errorf("decode model call %d/%d of %s: %w", c.Attempt, c.Step, turnID, err)
		}
		if err := json.Unmarshal(sc.Response, &c.Response); err != nil {
			return nil, fmt.Errorf("decode model call %d/%d of %s: %w", c.Attempt, c.Step, turnID, err)
		}
		out = append(out, c)
	}
	return out, nil
}
