package turn

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/lease"
)

// Cancel stores a durable cancel command for a turn and, when the turn has
// not started, ends it cancelled at once. A running turn's command waits
// for the run's fenced owner, which aborts the runtime and records the
// cancelled terminal. Only the turn's author may cancel it, or the room's
// owner in a shared room; a retry with the same command id converges.
func (s *Service) Cancel(ctx context.Context, actor authority.Member, commandID, turnID uuid.UUID) (*ent.Turn, error) {
	t, err := s.commandable(ctx, actor, turnID, "cancel")
	if err != nil {
		return nil, err
	}

	res, err := s.store().Cancel(ctx, lease.CommandParams{ID: commandID, Turn: turnID, Room: t.ConversationID, Actor: actor.ID, Attempt: t.Attempt})
	switch {
	case errors.Is(err, lease.ErrCommandReused):
		return nil, &errcode.Error{Code: errcode.Conflict, Field: "commandId", Message: "commandId was already used for another command"}
	case errors.Is(err, lease.ErrTurnEnded):
		return nil, errcode.New(errcode.Conflict, "the turn has already ended %s", res.State)
	case err != nil:
		return nil, err
	}
	return s.Get(ctx, turnID)
}
