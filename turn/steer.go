package turn

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entcommand "github.com/turngate/turngate/ent/command"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/pg"
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

	tx, err := s.Client.Tx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	// The turn's row under a share lock: a terminal being committed either
	// finished before this read (and the steer is refused) or waits for
	// this command to commit (and rejects it with the terminal if no step
	// boundary came first). No command is left pending on an ended turn.
	var state entturn.State
	if err := pg.QueryRow(ctx, tx, `SELECT state FROM turns WHERE id = $1 FOR SHARE`, []any{turnID}, &state); err != nil {
		return nil, fmt.Errorf("steer %s: %w", turnID, err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO commands (id, kind, turn_id, conversation_id, actor_id, text) VALUES ($1, 'steer', $2, $3, $4, $5)
ON CONFLICT (conversation_id, id) DO NOTHING`, commandID, turnID, t.ConversationID, actor.ID, text)
	if err != nil {
		return nil, fmt.Errorf("steer %s: %w", turnID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// A retry: the stored command must be this one, and it stands
		// whatever became of the turn since.
		cmd, err := tx.Command.Get(ctx, commandID)
		if err != nil {
			return nil, fmt.Errorf("steer %s: %w", turnID, err)
		}
		if cmd.Kind != entcommand.KindSteer || cmd.TurnID != turnID || cmd.ActorID != actor.ID || cmd.Text != text {
			return nil, &errcode.Error{Code: errcode.Conflict, Field: "commandId", Message: "commandId was already used for another command"}
		}
		return cmd, nil
	}
	switch state {
	case entturn.StateCompleted, entturn.StateFailed, entturn.StateCancelled:
		return nil, errcode.New(errcode.Conflict, "the turn has already ended %s: it can no longer be steered", state)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("steer %s: commit: %w", turnID, err)
	}
	s.Hub.Commands().Stored(turnID)
	return s.Client.Command.Get(ctx, commandID)
}
