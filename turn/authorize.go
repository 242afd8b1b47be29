package turn

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/errcode"
)

// commandable applies authority's rules for a command on a turn: a
// non-member of the turn's room does not see the turn (NOT_FOUND), and a
// member whom MayCommand does not allow is FORBIDDEN. verb names the
// command in that error ("cancel", "steer").
func (s *Service) commandable(ctx context.Context, actor authority.Member, turnID uuid.UUID, verb string) (*ent.Turn, error) {
	t, err := s.Get(ctx, turnID)
	if err != nil {
		return nil, err
	}
	room, err := s.Client.Conversation.Get(ctx, t.ConversationID)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", verb, turnID, err)
	}
	if err := authority.TurnVisible(ctx, s.Client, room.ID, actor.ID); err != nil {
		return nil, err
	}
	if !authority.MayCommand(actor.ID, t.AuthorID, authority.Room{ID: room.ID, Kind: room.Kind.String(), OwnerID: room.OwnerID}) {
		return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may %s it", verb)
	}
	return t, nil
}

// Visible returns the turn when viewer may see it — a current member of
// its room — and otherwise the NOT_FOUND a turn that does not exist gets
// (authority.TurnVisible).
func (s *Service) Visible(ctx context.Context, viewer authority.Member, turnID uuid.UUID) (*ent.Turn, error) {
	t, err := s.Get(ctx, turnID)
	if err != nil {
		return nil, err
	}
	if err := authority.TurnVisible(ctx, s.Client, t.ConversationID, viewer.ID); err != nil {
		return nil, err
	}
	return t, nil
}
