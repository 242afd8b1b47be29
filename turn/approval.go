package turn

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent/roommember"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// Approval statuses a tool call can end with besides ToolOK.
const (
	ToolRejected = "rejected"
	ToolExpired  = "expired"
)

// approvalKey keys one effectful call of a turn: the tool and its
// arguments, canonicalised, so the same proposal asked again by a
// replacement attempt meets the same approval.
func approvalKey(tool, arguments string) string {
	canonical := arguments
	var v any
	if json.Unmarshal([]byte(arguments), &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canonical = string(b)
		}
	}
	sum := sha256.Sum256([]byte(canonical))
	return tool + ":" + hex.EncodeToString(sum[:16])
}

type approvalRow struct {
	id       uuid.UUID
	state    string
	expires  time.Time
	executed bool
	result   json.RawMessage
}

const readApproval = `SELECT id, state, expires_at, executed_at IS NOT NULL, COALESCE(result, 'null') FROM approvals WHERE turn_id = $1 AND call_id = $2`

// gate is the approval gate of one effectful call: it asks for an
// approval (once per call of the turn), waits for a member's decision up
// to the configured bound, and on approval executes the tool exactly once,
// keyed by the approval's id. The assistant proposes; it never authorises.
func (h *callbackHost) gate(ctx context.Context, call runtime.ToolCall, t tools.Tool) (string, tools.Result, error) {
	c := h.claim
	key := approvalKey(call.Name, call.Arguments)
	a, err := h.requestApproval(ctx, key, call)
	if err != nil {
		return "", tools.Result{}, err
	}
	for a.state == "pending" {
		if !time.Now().Before(a.expires) {
			if err := h.expireApproval(ctx, a.id); err != nil {
				return "", tools.Result{}, err
			}
		} else {
			wake := h.r.cfg.Hub.Wait(c.Turn.ConversationID)
			timer := time.NewTimer(min(time.Until(a.expires), h.r.cfg.Poll))
			select {
			case <-ctx.Done():
				timer.Stop()
				return "", tools.Result{}, ctx.Err()
			case <-wake:
			case <-timer.C:
			}
			timer.Stop()
		}
		if err := pg.QueryRow(ctx, h.r.cfg.Client, readApproval, []any{c.Turn.ID, key}, &a.id, &a.state, &a.expires, &a.executed, &a.result); err != nil {
			return "", tools.Result{}, err
		}
	}
	switch a.state {
	case "rejected":
		return ToolRejected, tools.Result{Content: fmt.Sprintf("A member rejected %s: it was not executed.", call.Name)}, nil
	case "expired":
		return ToolExpired, tools.Result{Content: fmt.Sprintf("No member decided on %s in time: it was not executed.", call.Name)}, nil
	}
	if a.executed {
		// Executed before (by this turn's earlier attempt): never again.
		var res tools.Result
		if err := json.Unmarshal(a.result, &res); err != nil {
			return "", tools.Result{}, err
		}
		return ToolOK, res, nil
	}
	// Claim the execution, fenced by the lease: only the turn's current
	// run executes, and a later run takes over from a dead one.
	exe := lease.ExecutionParams{Claim: c, ApprovalID: a.id}
	if err := h.r.store.ClaimExecution(ctx, exe); err != nil {
		return "", tools.Result{}, err
	}
	status, out := h.run(ctx, call, t, a.id.String())
	raw, err := json.Marshal(out)
	if err != nil {
		return "", tools.Result{}, err
	}
	if status == ToolOK {
		if err := h.r.store.RecordExecution(ctx, exe, raw); err != nil {
			return "", tools.Result{}, err
		}

	}
	return status, out, nil
}

// requestApproval stores the approval for a call (or finds the one an
// earlier attempt stored) and journals approval_requested when it is new.
func (h *callbackHost) requestApproval(ctx context.Context, key string, call runtime.ToolCall) (approvalRow, error) {
	c := h.claim
	tx, err := h.r.cfg.Client.Tx(ctx)
	if err != nil {
		return approvalRow{}, err
	}
	defer tx.Rollback()
	id := uuid.New()
	res, err := tx.ExecContext(ctx, `INSERT INTO approvals (id, turn_id, conversation_id, call_id, tool, arguments, state, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, 'pending', now() + make_interval(secs => $7))
ON CONFLICT (turn_id, call_id) DO NOTHING`, id, c.Turn.ID, c.Turn.ConversationID, key, call.Name, jsonArguments(call.Arguments), h.r.cfg.ApprovalTimeout.Seconds())
	if err != nil {
		return approvalRow{}, fmt.Errorf("request approval: %w", err)
	}
	var a approvalRow
	if err := pg.QueryRow(ctx, tx, readApproval, []any{c.Turn.ID, key}, &a.id, &a.state, &a.expires, &a.executed, &a.result); err != nil {
		return approvalRow{}, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		args := h.redact(clipBytes(call.Arguments, maxArgumentsShown))
		entries, err := journal.Append(ctx, tx, c.Turn.ConversationID, &c.Fence, journal.Draft{
			Kind: journal.KindApprovalRequested, TurnID: h.turnID(), Attempt: c.Turn.Attempt,
			Payload: journal.ApprovalRequestedPayload{ApprovalID: a.id, Tool: call.Name, Arguments: args, ExpiresAt: a.expires.UTC()},
		})
		if err != nil {
			return approvalRow{}, err
		}
		if err := tx.Commit(); err != nil {
			return approvalRow{}, err
		}
		h.r.cfg.Hub.Committed(c.Turn.ConversationID, entries[0].Seq)
		return a, nil
	}
	return a, tx.Commit()
}

// expireApproval ends a pending approval whose time ran out, journaled.
func (h *callbackHost) expireApproval(ctx context.Context, id uuid.UUID) error {
	c := h.claim
	tx, err := h.r.cfg.Client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = 'expired', decided_at = now() WHERE id = $1 AND state = 'pending' AND expires_at <= now()`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil // decided meanwhile, or not yet due by the database clock
	}
	entries, err := journal.Append(ctx, tx, c.Turn.ConversationID, &c.Fence, journal.Draft{
		Kind: journal.KindApprovalDecided, TurnID: h.turnID(), Attempt: c.Turn.Attempt,
		Payload: journal.ApprovalDecidedPayload{ApprovalID: id, Decision: "expired"},
	})
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	h.r.cfg.Hub.Committed(c.Turn.ConversationID, entries[0].Seq)
	return nil
}

func jsonArguments(args string) string {
	if json.Valid([]byte(args)) {
		return args
	}
	b, _ := json.Marshal(args)
	return string(b)
}

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
	err := pg.QueryRow(ctx, s.Client, `SELECT a.turn_id, a.conversation_id, t.author_id, c.owner_id, c.kind, a.state
FROM approvals a JOIN turns t ON t.id = a.turn_id JOIN conversations c ON c.id = a.conversation_id WHERE a.id = $1`,
		[]any{approvalID}, &turnID, &roomID, &authorID, &ownerID, &kind, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errcode.New(errcode.NotFound, "approval %s not found", approvalID)
	}
	if err != nil {
		return nil, fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	if actor.ID != authorID && !(kind == "shared" && actor.ID == ownerID) {
		return nil, errcode.New(errcode.Forbidden, "only the turn's author, or the owner of a shared room, may decide this approval")
	}
	if kind == "shared" && actor.ID == ownerID && actor.ID != authorID {
		// The owner decides only while still the owner and a member.
		member, err := s.Client.RoomMember.Query().Where(roommember.ConversationID(roomID), roommember.MemberID(actor.ID)).Exist(ctx)
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
  AND EXISTS (SELECT 1 FROM room_members WHERE conversation_id = $4 AND member_id = $3)
RETURNING state`, []any{approvalID, decision, actor.ID, roomID}, &decided)
	if errors.Is(err, sql.ErrNoRows) {
		var member bool
		if err := pg.QueryRow(ctx, tx, `SELECT EXISTS (SELECT 1 FROM room_members WHERE conversation_id = $1 AND member_id = $2)`,
			[]any{roomID, actor.ID}, &member); err != nil {
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
		return nil, errcode.New(errcode.Conflict, "approval %s is already %s", approvalID, current.State)
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
