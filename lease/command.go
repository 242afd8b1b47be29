package lease

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	entcommand "github.com/turngate/turngate/ent/command"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
)

// ErrCommandReused reports a command id (a member's idempotency key)
// already stored for another command: another kind, turn, actor or text.
var ErrCommandReused = errors.New("command id already used for another command")

// ErrTurnEnded reports a command on a turn that has already ended; the
// CommandResult's State says how.
var ErrTurnEnded = errors.New("the turn has already ended")

// CommandParams is a member's command on a turn: a cancel, or a steer
// with its instruction. The caller has authorised the actor.
type CommandParams struct {
	// ID is the member's idempotency key: a retry with it converges on
	// the one stored command.
	ID    uuid.UUID
	Turn  uuid.UUID
	Room  uuid.UUID
	Actor uuid.UUID
	// Attempt is the turn's attempt as the caller read it, for the
	// entries a cancel of a queued turn journals.
	Attempt int
	// Text is a steer's instruction.
	Text string
}

// CommandResult says what became of a stored command.
type CommandResult struct {
	// Retried: the command was stored before, and this call is its retry.
	Retried bool
	// Ended: the cancel ended the queued turn itself; otherwise it waits
	// for the run that owns the turn.
	Ended bool
	// State is the turn's state when the command came too late
	// (ErrTurnEnded).
	State entturn.State
}

const insertCommand = `INSERT INTO commands (id, kind, turn_id, conversation_id, actor_id, text) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (conversation_id, id) DO NOTHING`

// lockTurnState reads the turn's state under a share lock: a terminal
// being committed either finished before the read (and the command comes
// too late) or waits for the command's transaction to commit (and
// settles it with the terminal). No command is left pending on an ended
// turn.
const lockTurnState = `SELECT state FROM turns WHERE id = $1 FOR SHARE`

// storeCommand inserts the command in tx; a command stored before under
// the same id must be this one (ErrCommandReused otherwise), and is
// reported as a retry.
func storeCommand(ctx context.Context, tx *ent.Tx, kind entcommand.Kind, p CommandParams) (retried bool, err error) {
	res, err := tx.ExecContext(ctx, insertCommand, p.ID, kind.String(), p.Turn, p.Room, p.Actor, p.Text)
	if err != nil {
		return false, interpretError(err, ErrCommandReused, "store "+kind.String()+" of", p.Turn)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return false, nil
	}
	cmd, err := tx.Command.Get(ctx, p.ID)
	if err != nil {
		return false, interpretError(err, ErrCommandReused, "read "+kind.String()+" of", p.Turn)
	}
	if cmd.Kind != kind || cmd.TurnID != p.Turn || cmd.ActorID != p.Actor || cmd.Text != p.Text {
		return false, ErrCommandReused
	}
	return true, nil
}

// Steer stores a steering instruction for a turn that has not ended, for
// the run that owns it to claim at its next step boundary (ClaimSteers).
// A retry converges on the stored command whatever became of the turn
// since; a new steer on an ended turn is ErrTurnEnded and stores nothing.
func (s *Store) Steer(ctx context.Context, p CommandParams) (CommandResult, error) {
	var out CommandResult
	err := s.inTx(ctx, "steer", p.Turn, func(tx *ent.Tx) error {
		if err := queryRow(ctx, tx, ErrTurnEnded, "steer", p.Turn, lockTurnState, []any{p.Turn}, &out.State); err != nil {
			return err
		}
		retried, err := storeCommand(ctx, tx, entcommand.KindSteer, p)
		if err != nil || retried {
			out.Retried = retried
			return err
		}
		if ended(out.State) {
			return ErrTurnEnded
		}
		return nil
	})
	if err == nil && !out.Retried {
		s.hub.Commands().Stored(p.Turn)
	}
	return out, err
}

// Cancel stores a cancel command for a turn. A queued turn ends cancelled
// at once, in the same transaction (CancelQueued, Settle, the terminal
// entry); a running turn's command waits for the run that owns it, which
// aborts its runtime and ends the turn. A retry converges; a cancel of an
// ended turn is ErrTurnEnded and stores nothing.
func (s *Store) Cancel(ctx context.Context, p CommandParams) (CommandResult, error) {
	var out CommandResult
	var head int64
	err := s.inTx(ctx, "cancel", p.Turn, func(tx *ent.Tx) error {
		retried, err := storeCommand(ctx, tx, entcommand.KindCancel, p)
		if err != nil || retried {
			out.Retried = retried
			return err
		}
		room, err := s.CancelQueued(ctx, tx, CancelQueuedParams{TurnID: p.Turn})
		if errors.Is(err, ErrNotClaimable) {
			// Running, claimed a moment ago, or ended.
			if err := queryRow(ctx, tx, ErrTurnEnded, "cancel", p.Turn, lockTurnState, []any{p.Turn}, &out.State); err != nil {
				return err
			}
			if ended(out.State) {
				return ErrTurnEnded
			}
			return nil
		}
		if err != nil {
			return err
		}
		// This command ends the turn; any other still pending for it (a
		// steer no step boundary reached) is rejected with it, in the
		// journal too.
		drafts, err := Settle(ctx, tx, SettleParams{Room: room, Turn: p.Turn, Attempt: p.Attempt,
			Command: uuid.NullUUID{UUID: p.ID, Valid: true}, Outcome: entturn.StateCancelled, Reason: outcome.ReasonCancelled})
		if err != nil {
			return err
		}
		drafts = append(drafts, journal.Draft{
			Kind: journal.KindTurnTerminal, TurnID: uuid.NullUUID{UUID: p.Turn, Valid: true}, Attempt: p.Attempt,
			ActorID: uuid.NullUUID{UUID: p.Actor, Valid: true},
			Payload: journal.TerminalPayload{Outcome: entturn.StateCancelled.String(), Reason: outcome.ReasonCancelled},
		})
		entries, err := journal.Append(ctx, tx, room, nil, drafts...)
		if err != nil {
			return interpretError(err, ErrTurnEnded, "cancel", p.Turn)
		}
		head, out.Ended, out.State = entries[len(entries)-1].Seq, true, entturn.StateCancelled
		return nil
	})
	switch {
	case err != nil, out.Retried:
	case out.Ended:
		s.hub.Committed(p.Room, head)
		s.metrics.Ended(entturn.StateCancelled.String(), outcome.ReasonCancelled)
	default:
		s.hub.Commands().Stored(p.Turn)
	}
	return out, err
}

// ended reports whether a turn in state has ended.
func ended(state entturn.State) bool {
	switch state {
	case entturn.StateCompleted, entturn.StateFailed, entturn.StateCancelled:
		return true
	}
	return false
}

const pendingCancel = `SELECT id FROM commands WHERE turn_id = $1 AND kind = 'cancel' AND state = 'pending' ORDER BY created_at, id LIMIT 1`

// PendingCancel finds the first pending cancel command of a turn, and
// reports false when there is none.
func (s *Store) PendingCancel(ctx context.Context, turnID uuid.UUID) (uuid.UUID, bool, error) {
	var id uuid.UUID
	err := queryRow(ctx, s.client, errNone, "pending cancel of", turnID, pendingCancel, []any{turnID}, &id)
	if errors.Is(err, errNone) {
		return uuid.Nil, false, nil
	}
	return id, err == nil, err
}
