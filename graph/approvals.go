package graph

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	entapproval "github.com/turngate/turngate/ent/approval"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/turn"
)

// decideApprovalInput is decideApproval's input as validated.
type decideApprovalInput struct {
	ApprovalID string `json:"approvalId" validate:"uuid"`
	Decision   string `json:"decision" validate:"oneof=APPROVE REJECT"`
}

// decisions maps the contract's decisions to the service's.
var decisions = map[model.ApprovalDecision]string{
	model.ApprovalDecisionApprove: turn.DecisionApprove,
	model.ApprovalDecisionReject:  turn.DecisionReject,
}

// argumentRedactor redacts an approval's arguments as the runner redacts
// them in its approval_requested entry (its default patterns), so the
// approval shows a member no more than the journal does.
var argumentRedactor = func() *guard.Redactor {
	r, err := guard.NewRedactor(guard.DefaultPatterns())
	if err != nil {
		panic(err)
	}
	return r
}()

// redactArguments redacts every string of a JSON value, keeping it JSON.
func redactArguments(raw json.RawMessage) model.JSON {
	return model.JSON(argumentRedactor.RedactJSON(raw))
}

// approvalState is the contract's state of a stored approval: a pending
// one whose time has run out is EXPIRED — deciding it is a CONFLICT, and
// its effect never runs — even before its run records the expiry.
func approvalState(state string, expiresAt, now time.Time) model.ApprovalState {
	if state == string(entapproval.StatePending) && !now.Before(expiresAt) {
		return model.ApprovalStateExpired
	}
	return model.ApprovalState(strings.ToUpper(state))
}

func toApproval(a *turn.ApprovalState) *model.Approval {
	return &model.Approval{
		ID:        a.ID.String(),
		TurnID:    a.TurnID.String(),
		Tool:      a.Tool,
		Arguments: redactArguments(a.Arguments),
		State:     approvalState(a.State, a.ExpiresAt, time.Now()),
		ExpiresAt: a.ExpiresAt,
		Executed:  a.Executed,
	}
}

func toEntApproval(a *ent.Approval, now time.Time) *model.Approval {
	return &model.Approval{
		ID:        a.ID.String(),
		TurnID:    a.TurnID.String(),
		Tool:      a.Tool,
		Arguments: redactArguments(a.Arguments),
		State:     approvalState(string(a.State), a.ExpiresAt, now),
		ExpiresAt: a.ExpiresAt,
		Executed:  a.ExecutedAt != nil,
	}
}

// turnApprovals lists a turn's approvals, oldest first; a turn withheld
// from the viewer shows them without their arguments ("{}"), as its
// journal does.
func turnApprovals(ctx context.Context, turns *turn.Service, turnID uuid.UUID, withheld bool) ([]*model.Approval, error) {
	as, err := turns.Approvals(ctx, turnID)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]*model.Approval, len(as))
	for i, a := range as {
		out[i] = approvalFor(a, now, withheld)
	}
	return out, nil
}

// approvalFor is a stored approval as a viewer reads it: without its
// arguments ("{}") when its turn is withheld from them, as its journal
// entry shows it.
func approvalFor(a *ent.Approval, now time.Time, withheld bool) *model.Approval {
	out := toEntApproval(a, now)
	if withheld {
		out.Arguments = model.JSON("{}")
	}
	return out
}
