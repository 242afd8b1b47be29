package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/lease"
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
	store := s.store()
	r, err := store.ApprovalRoom(ctx, approvalID, actor.ID)
	if errors.Is(err, lease.ErrNoApproval) || err == nil && !r.Member {
		// To anyone outside its room, an approval does not exist.
		return nil, errcode.New(errcode.NotFound, "approval not found")
	}
	if err != nil {
		return nil, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	if !authority.MayCommand(actor.ID, r.Author, authority.Room{ID: r.Room, Kind: r.Kind, OwnerID: r.Owner}) {
		return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may decide this approval")
	}
	if r.Kind == string(entconv.KindShared) && actor.ID == r.Owner && actor.ID != r.Author {
		// The owner decides only while still the owner and a member.
		member, err := authority.IsMember(ctx, s.Client, r.Room, actor.ID)
		if err != nil {
			return nil, fmt.Errorf("decide approval %s: owner's membership: %w", approvalID, err)
		}
		if !member {
			return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may decide this approval")
		}
	}
	// The decision lands only while the decider is still a member of the
	// room (the store holds the room's row lock): the database guards the
	// authorisation checked above, not the Go code alone.
	err = store.DecideApproval(ctx, lease.DecideApprovalParams{ID: approvalID, Room: r.Room, Turn: r.Turn, Actor: actor.ID, Decision: decision})
	switch {
	case errors.Is(err, lease.ErrNotMember):
		return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may decide this approval")
	case errors.Is(err, lease.ErrNotPending):
		current, err := s.approvalState(ctx, approvalID)
		if err != nil {
			return nil, err
		}
		if current.State == decision && current.DecidedBy == actor.ID {
			return current, nil // a retry: converge
		}
		return nil, errcode.New(errcode.Conflict, "the approval is already %s", current.State)
	case err != nil:
		return nil, err
	}
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
	a, err := s.store().Approval(ctx, id)
	if err != nil {
		return nil, err
	}
	return &ApprovalState{ID: a.ID, TurnID: a.TurnID, Tool: a.Tool, Arguments: json.RawMessage(a.Arguments), State: a.State,
		DecidedBy: a.DecidedBy, ExpiresAt: a.ExpiresAt, Executed: a.Executed}, nil
}
