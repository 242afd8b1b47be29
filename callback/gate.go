package callback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	entapproval "github.com/turngate/turngate/ent/approval"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/lease"
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
	at := lease.ApprovalParams{Claim: c, CallID: key}
	a, err := h.deps.Store.RequestApproval(ctx, lease.RequestApprovalParams{ApprovalParams: at, Tool: call.Name,
		Arguments: jsonArguments(call.Arguments), Shown: h.redact(guard.Bound(call.Arguments, maxArgumentsShown)),
		TTL: h.deps.ApprovalTimeout})
	if err != nil {
		return "", tools.Result{}, err
	}
	for a.State == string(entapproval.StatePending) {
		if !time.Now().Before(a.ExpiresAt) {
			if err := h.deps.Store.ExpireApproval(ctx, lease.ExpireApprovalParams{Claim: c, ID: a.ID}); err != nil {
				return "", tools.Result{}, err
			}
		} else {
			wake := h.deps.Hub.Wait(c.Turn.ConversationID)
			timer := time.NewTimer(min(time.Until(a.ExpiresAt), h.deps.Poll))
			select {
			case <-ctx.Done():
				timer.Stop()
				return "", tools.Result{}, ctx.Err()
			case <-wake:
			case <-timer.C:
			}
			timer.Stop()
		}
		if a, err = h.deps.Store.CallApproval(ctx, at); err != nil {
			return "", tools.Result{}, err
		}
	}
	switch a.State {
	case "rejected":
		return ToolRejected, tools.Result{Content: fmt.Sprintf("A member rejected %s: it was not executed.", call.Name)}, nil
	case "expired":
		return ToolExpired, tools.Result{Content: fmt.Sprintf("No member decided on %s in time: it was not executed.", call.Name)}, nil
	}
	if a.Executed {
		// Executed before (by this turn's earlier attempt): never again.
		var res tools.Result
		if err := json.Unmarshal(a.Result, &res); err != nil {
			return "", tools.Result{}, err
		}
		return ToolOK, res, nil
	}
	// Claim the execution, fenced by the lease: only the turn's current
	// run executes, and a later run takes over from a dead one.
	exe := lease.ExecutionParams{Claim: c, ApprovalID: a.ID}
	if err := h.deps.Store.ClaimExecution(ctx, exe); err != nil {
		return "", tools.Result{}, err
	}
	// The effect sends what the approver approved: the stored arguments.
	call.Arguments = a.Arguments
	status, out := h.run(ctx, call, t, a.ID.String())
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

func jsonArguments(args string) string {
	if json.Valid([]byte(args)) {
		return args
	}
	b, _ := json.Marshal(args)
	return string(b)
}
