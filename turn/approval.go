package turn

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/pg"
)

// Decisions a member can make on an approval.
const (
	DecisionApprove = "approved"
	DecisionReject  = "rejected"
)

// DecideApproval records a member's decision on a pending approval. Only
// the turn's author may decide — or, in a shared room, the room's owner;
// everyone else is FORBIDDEN. A retry of the same decision converges; a
// different decision after one was made, or a decision after the approval
// expired, is a CONFLICT.
func (s *Service) DecideApproval(ctx context.Context, actor authority.Member, approvalID uuid.UUID, decision string) (*ApprovalState, error) {
	if decision != DecisionApprove && decision != DecisionReject {
		return nil, errcode.New(errcode.BadUserInput, "decision must be approve or reject")
	}
	var turnID, roomID, authorID, ownerID uuid.UUID
	var kind, state string
	var member bool
	err := pg.QueryRow(ctx, s.Client, `SELECT a.turn_id, a.conversation_id, t.author_id, c.owner_id, c.kind, a.state, `+
		authority.MemberSQL("a.conversation_id", "$2")+`
FROM approvals a JOIN turns t ON t.id = a.turn_id JOIN conversations c ON c.id = a.conversation_id WHERE a.id = $1`,
		[]any{approvalID, actor.ID}, &turnID, &roomID, &authorID, &ownerID, &kind, &state, &member)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !member {
		// To anyone outside its room, an approval does not exist.
		return nil, errcode.New(errcode.NotFound, "approval not found")
	}
	if err != nil {
		return nil, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	if !authority.MayCommand(actor.ID, authorID, authority.Room{ID: roomID, Kind: kind, OwnerID: ownerID}) {
		return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may decide this approval")
	}
	if kind == string(entconv.KindShared) && actor.ID == ownerID && actor.ID != authorID {
		// The owner decides only while still the owner and a member.
		member, err := authority.IsMember(ctx, s.Client, roomID, actor.ID)
		if err != nil {
			return nil, fmt.Errorf("decide approval %s: owner's membership: %w", approvalID, err)
		}
		if !member {
			return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may decide this approval")
		}
	}
	tx, err := s.Client.Tx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	// The room's row lock orders this decision against membership changes
	// (they take it too), and the decision lands only while the decider is
	// still a member of the room: the database guards the authorisation
	// checked above, not the Go code alone.
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR SHARE`, roomID); err != nil {
		return nil, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	var decided string
	err = pg.QueryRow(ctx, tx, `UPDATE approvals SET state = $2, decided_by = $3, decided_at = now()
WHERE id = $1 AND state = 'pending' AND expires_at > now()
  AND `+authority.MemberSQL("$4", "$3")+`
RETURNING state`, []any{approvalID, decision, actor.ID, roomID}, &decided)
	if errors.Is(err, sql.ErrNoRows) {
		member, err := authority.IsMember(ctx, tx, roomID, actor.ID)
		if err != nil {
			return nil, fmt.Errorf("decide approval %s: %w", approvalID, err)
		}
		if !member {
			return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may decide this approval")
		}
		tx.Rollback()
		current, err := s.approvalState(ctx, approvalID)
		if err != nil {
			return nil, err
		}
		if current.State == decision && current.DecidedBy == actor.ID {
			return current, nil // a retry: converge
		}
		return nil, errcode.New(errcode.Conflict, "the approval is already %s", current.State)
	}
	if err != nil {
		return nil, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	var attempt int
	if err := pg.QueryRow(ctx, tx, `SELECT attempt FROM turns WHERE id = $1`, []any{turnID}, &attempt); err != nil {
		return nil, err
	}
	entries, err := journal.Append(ctx, tx, roomID, nil, journal.Draft{
		Kind: journal.KindApprovalDecided, TurnID: uuid.NullUUID{UUID: turnID, Valid: true}, Attempt: attempt,
		ActorID: uuid.NullUUID{UUID: actor.ID, Valid: true},
		Payload: journal.ApprovalDecidedPayload{ApprovalID: approvalID, Decision: decision, DecidedBy: actor.ID},
	})
	if err != nil {
		return nil, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("decide approval %s: commit: %w", approvalID, err)
	}
	s.Hub.Committed(roomID, entries[0].Seq)
	return s.approvalState(ctx, approvalID)
}

// ApprovalState is an approval as a member sees it.
type ApprovalState struct {
	ID        uuid.UUID
	TurnID    uuid.UUID
	Tool      string
	Arguments json.RawMessage
	State     string
	DecidedBy uuid.UUID
	ExpiresAt time.Time
	Executed  bool
}

func (s *Service) approvalState(ctx context.Context, id uuid.UUID) (*ApprovalState, error) {
	a := &ApprovalState{ID: id}
	var decidedBy uuid.NullUUID
	err := pg.QueryRow(ctx, s.Client, `SELECT turn_id, tool, arguments, state, decided_by, expires_at, executed_at IS NOT NULL FROM approvals WHERE id = $1`,
		[]any{id}, &a.TurnID, &a.Tool, &a.Arguments, &a.State, &decidedBy, &a.ExpiresAt, &a.Executed)
	if err != nil {
		return nil, fmt.Errorf("approval %s: %w", id, err)
	}
	a.DecidedBy = decidedBy.UUID
	return a, nil
}
