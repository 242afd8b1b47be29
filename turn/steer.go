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

// MaxSteerText bounds a steering instruction, in bytes.
const MaxSteerText = 4000

// Steer stores a durable steering instruction for a turn that has not
// ended: a command naming the exact turn, its conversation and the actor.
// Any replica may accept it; only the run that owns the turn, fenced by its
// lease, claims it and hands it to the controller at the next step
// boundary (steer_delivered in the journal). A retry with the same command
// id converges on the one stored instruction. Only the turn's author may
// steer it — or, in a shared room, the room's owner; a steer still pending
// when the turn ends is rejected with the terminal.
func (s *Service) Steer(ctx context.Context, actor authority.Member, commandID, turnID uuid.UUID, text string) (*ent.Command, error) {
	if text == "" || len(text) > MaxSteerText {
		return nil, errcode.New(errcode.BadUserInput, "steering text must be 1 to %d bytes", MaxSteerText)
	}
	t, err := s.commandable(ctx, actor, turnID, "steer")
	if err != nil {
		return nil, err
	}

	res, err := s.store().Steer(ctx, lease.CommandParams{ID: commandID, Turn: turnID, Room: t.ConversationID, Actor: actor.ID, Text: text})
	switch {
	case errors.Is(err, lease.ErrCommandReused):
		return nil, &errcode.Error{Code: errcode.Conflict, Field: "commandId", Message: "commandId was already used for another command"}
	case errors.Is(err, lease.ErrTurnEnded):
		return nil, errcode.New(errcode.Conflict, "the turn has already ended %s: it can no longer be steered", res.State)
	case err != nil:
		return nil, err
	}
	return s.Client.Command.Get(ctx, commandID)
}
