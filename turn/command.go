package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entcommand "github.com/turngate/turngate/ent/command"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/pg"
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

	tx, err := s.Client.Tx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO commands (id, kind, turn_id, conversation_id, actor_id) VALUES ($1, 'cancel', $2, $3, $4)
ON CONFLICT (conversation_id, id) DO NOTHING`, commandID, turnID, t.ConversationID, actor.ID)
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", turnID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// A retry: the stored command must be this one.
		cmd, err := tx.Command.Get(ctx, commandID)
		if err != nil {
			return nil, fmt.Errorf("cancel %s: %w", turnID, err)
		}
		if cmd.Kind != entcommand.KindCancel || cmd.TurnID != turnID || cmd.ActorID != actor.ID {
			return nil, &errcode.Error{Code: errcode.Conflict, Field: "commandId", Message: "commandId was already used for another command"}
		}
		tx.Rollback()
		return s.Get(ctx, turnID)
	}
	switch t.State {
	case entturn.StateCompleted, entturn.StateFailed, entturn.StateCancelled:
		return nil, errcode.New(errcode.Conflict, "the turn has already ended %s", t.State)
	}
	roomID, err := s.store().CancelQueued(ctx, tx, lease.CancelQueuedParams{TurnID: turnID})
	switch {
	case errors.Is(err, lease.ErrNotClaimable):
		// Running, or claimed a moment ago: the command waits for the
		// run's owner. Read the turn under a share lock first: a terminal
		// being committed finishes before this read (and the command comes
		// too late), or waits for this command to commit (and settles it
		// with its terminal). Either way no command is left pending.
		var state entturn.State
		if err := pg.QueryRow(ctx, tx, `SELECT state FROM turns WHERE id = $1 FOR SHARE`, []any{turnID}, &state); err != nil {
			return nil, fmt.Errorf("cancel %s: %w", turnID, err)
		}
		if state != entturn.StateRunning && state != entturn.StateQueued {
			return nil, errcode.New(errcode.Conflict, "the turn has already ended %s", state)
		}
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("cancel %s: commit: %w", turnID, err)
		}
		s.Hub.Commands().Stored(turnID)
		return s.Get(ctx, turnID)
	case err != nil:
		return nil, fmt.Errorf("cancel %s: %w", turnID, err)
	}
	// This command ends the turn; any other still pending for it (a steer
	// no step boundary reached) is rejected with it, in the journal too.
	drafts, err := lease.Settle(ctx, tx, lease.SettleParams{Room: roomID, Turn: turnID, Attempt: t.Attempt,
		Command: uuid.NullUUID{UUID: commandID, Valid: true}, Outcome: entturn.StateCancelled, Reason: outcome.ReasonCancelled})
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", turnID, err)
	}
	drafts = append(drafts, journal.Draft{
		Kind: journal.KindTurnTerminal, TurnID: uuid.NullUUID{UUID: turnID, Valid: true}, Attempt: t.Attempt,
		ActorID: uuid.NullUUID{UUID: actor.ID, Valid: true},
		Payload: journal.TerminalPayload{Outcome: entturn.StateCancelled.String(), Reason: outcome.ReasonCancelled},
	})
	entries, err := journal.Append(ctx, tx, roomID, nil, drafts...)
	if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", turnID, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("cancel %s: commit: %w", turnID, err)
	}
	s.Hub.Committed(roomID, entries[len(entries)-1].Seq)
	s.Metrics.Ended(entturn.StateCancelled.String(), outcome.ReasonCancelled)
	return s.Get(ctx, turnID)
}
