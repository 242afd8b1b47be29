package callback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	entapproval "github.com/turngate/turngate/ent/approval"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/tracing"
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
	// arguments are the call's arguments as the approval stores them:
	// redacted, shown to the approver, and what the execution sends.
	arguments string
}

const readApproval = `SELECT id, state, expires_at, executed_at IS NOT NULL, COALESCE(result, 'null'), arguments::text FROM approvals WHERE turn_id = $1 AND call_id = $2`

// gate is the approval gate of one effectful call: it asks for an
// approval (once per call of the turn), waits for a member's decision up
// to the configured bound, and on approval executes the tool exactly once,
// keyed by the approval's id. The assistant proposes; it never authorises.
func (h *Host) gate(ctx context.Context, call runtime.ToolCall, t tools.Tool) (string, tools.Result, error) {
	ctx, span := tracing.Or(h.deps.Tracer).Start(ctx, "approval.gate", trace.WithAttributes(attribute.String("turngate.tool", call.Name)))
	defer span.End()
	c := h.claim
	key := approvalKey(call.Name, call.Arguments)
	// What the approver is shown and what the effect sends are the same
	// redacted bytes: nothing the journal would hide leaves the server.
	call.Arguments = string(h.deps.Redactor.RedactJSON([]byte(call.Arguments)))
	a, err := h.requestApproval(ctx, key, call)
	if err != nil {
		return "", tools.Result{}, err
	}
	for a.state == string(entapproval.StatePending) {
		if !time.Now().Before(a.expires) {
			if err := h.expireApproval(ctx, a.id); err != nil {
				return "", tools.Result{}, err
			}
		} else {
			wake := h.deps.Hub.Wait(c.Turn.ConversationID)
			timer := time.NewTimer(min(time.Until(a.expires), h.deps.Poll))
			select {
			case <-ctx.Done():
				timer.Stop()
				return "", tools.Result{}, ctx.Err()
			case <-wake:
			case <-timer.C:
			}
			timer.Stop()
		}
		if err := pg.QueryRow(ctx, h.deps.Client, readApproval, []any{c.Turn.ID, key}, &a.id, &a.state, &a.expires, &a.executed, &a.result, &a.arguments); err != nil {
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
	if err := h.deps.Store.ClaimExecution(ctx, exe); err != nil {
		return "", tools.Result{}, err
	}
	// The effect sends what the approver approved: the stored arguments.
	call.Arguments = a.arguments
	status, out := h.run(ctx, call, t, a.id.String())
	raw, err := json.Marshal(out)
	if err != nil {
		return "", tools.Result{}, err
	}
	if status == ToolOK {
		if err := h.deps.Store.RecordExecution(ctx, exe, raw); err != nil {
			return "", tools.Result{}, err
		}

	}
	return status, out, nil
}

// requestApproval stores the approval for a call (or finds the one an
// earlier attempt stored) and journals approval_requested when it is new.
func (h *Host) requestApproval(ctx context.Context, key string, call runtime.ToolCall) (approvalRow, error) {
	c := h.claim
	tx, err := h.deps.Client.Tx(ctx)
	if err != nil {
		return approvalRow{}, err
	}
	defer tx.Rollback()
	id := uuid.New()
	res, err := tx.ExecContext(ctx, `INSERT INTO approvals (id, turn_id, conversation_id, call_id, tool, arguments, state, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, 'pending', now() + make_interval(secs => $7))
ON CONFLICT (conversation_id, turn_id, call_id) DO NOTHING`, id, c.Turn.ID, c.Turn.ConversationID, key, call.Name, jsonArguments(call.Arguments), h.deps.ApprovalTimeout.Seconds())
	if err != nil {
		return approvalRow{}, fmt.Errorf("request approval: %w", err)
	}
	var a approvalRow
	if err := pg.QueryRow(ctx, tx, readApproval, []any{c.Turn.ID, key}, &a.id, &a.state, &a.expires, &a.executed, &a.result, &a.arguments); err != nil {
		return approvalRow{}, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		args := h.redact(guard.Bound(call.Arguments, maxArgumentsShown))
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
		h.deps.Hub.Committed(c.Turn.ConversationID, entries[0].Seq)
		return a, nil
	}
	return a, tx.Commit()
}

// expireApproval ends a pending approval whose time ran out, journaled.
func (h *Host) expireApproval(ctx context.Context, id uuid.UUID) error {
	c := h.claim
	tx, err := h.deps.Client.Tx(ctx)
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
	h.deps.Hub.Committed(c.Turn.ConversationID, entries[0].Seq)
	return nil
}

func jsonArguments(args string) string {
	if json.Valid([]byte(args)) {
		return args
	}
	b, _ := json.Marshal(args)
	return string(b)
}
