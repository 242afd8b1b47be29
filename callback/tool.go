package callback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/authority"
	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/tracing"
)

// Tool statuses.
const (
	ToolOK           = "ok"
	ToolForbidden    = "forbidden"
	ToolRefused      = "refused"
	ToolBadArguments = "bad_arguments"
	ToolFailed       = "failed"
)

const maxArgumentsShown = 1024

// Tool runs one tool as the turn's member. The request is journaled
// (tool_requested) before anything runs; the tool must be one the contract
// offers, and the member must hold its permission now — re-read from the
// database at the call, not taken from the turn's start. The result the
// model reads is bounded, and its outcome is journaled (tool_completed). A
// refusal is a result the model is told about; only a lost fence is an
// error.
func (h *Host) Tool(ctx context.Context, req runtime.ToolRequest) (runtime.ToolResult, error) {
	if err := h.check(req.Run); err != nil {
		return runtime.ToolResult{}, err
	}
	call := req.Call
	ctx, span := tracing.Or(h.deps.Tracer).Start(ctx, "tool.call", trace.WithAttributes(attribute.String("turngate.tool.call", call.ID)))
	defer span.End()
	drafts := append(h.takeHeld(), journal.Draft{Kind: journal.KindToolRequested, TurnID: h.turnID(), Attempt: h.claim.Turn.Attempt,
		Payload: journal.ToolRequestedPayload{CallID: call.ID, Name: call.Name, Arguments: guard.Bound(call.Arguments, maxArgumentsShown)}})
	if err := h.append(ctx, drafts...); err != nil {
		return runtime.ToolResult{}, err
	}

	status, res := h.execute(ctx, call)
	// A tool the contract does not offer is counted as "other": the
	// model chooses names, and a label set must stay bounded.
	name := "other"
	if _, ok := h.tools[call.Name]; ok {
		name = call.Name
	}
	h.deps.Metrics.ToolCall(name, status)
	// The permission was read again for this call (execute): the span
	// says which and how it went.
	span.SetAttributes(attribute.String("turngate.tool", name), attribute.String("turngate.tool.status", status))
	if t, ok := h.tools[call.Name]; ok && t.Permission() != "" {
		span.SetAttributes(attribute.String("turngate.tool.permission", t.Permission()))
	}
	h.mu.Lock()
	h.usage.ToolCalls++
	h.mu.Unlock()

	// The projection the model reads: redacted, then bounded.
	content, _ := guard.Chain{Redactor: h.deps.Redactor, MaxResultBytes: h.deps.MaxToolResult}.Result(res.Content)
	out := runtime.ToolResult{CallID: call.ID, Name: call.Name, Content: content}
	if status != ToolOK {
		out.Error = status
	}
	cites := make([]string, 0, len(res.Citations))
	for _, c := range res.Citations {
		cites = append(cites, c.ID)
	}
	if status == ToolOK {
		// What the result derives from is the turn's evidence before the
		// result is journaled or reaches the model: a viewer, or a later
		// model context, that may not read it all does not get the turn.
		if err := h.deps.Store.AddEvidence(ctx, lease.EvidenceParams{Claim: h.claim, Documents: documentsOf(res)}); err != nil {
			return runtime.ToolResult{}, err
		}
		h.remember(res.Citations)
		if err := h.settleArtifacts(ctx, res.Artifacts); err != nil {
			return runtime.ToolResult{}, err
		}
	}
	if err := h.append(ctx, journal.Draft{Kind: journal.KindToolCompleted, TurnID: h.turnID(), Attempt: h.claim.Turn.Attempt,
		Payload: journal.ToolCompletedPayload{CallID: call.ID, Name: call.Name, Status: status, Bytes: len(out.Content), Citations: cites}}); err != nil {
		return runtime.ToolResult{}, err
	}
	return out, nil
}

// execute runs the tool as the member and says how it went.
func (h *Host) execute(ctx context.Context, call runtime.ToolCall) (string, tools.Result) {
	// Loop control: a tool outside the agent version's list, or the same
	// call repeated past the bound, stops the tool loop.
	if v := h.loop.Check(call.Name, call.Arguments); !v.Allowed {
		h.mu.Lock()
		h.stopped = v.Reason
		h.mu.Unlock()
		return v.Reason, tools.Result{Content: v.Message + " No more tools are offered in this turn: answer from what you have."}
	}
	t, ok := h.tools[call.Name]
	if !ok {
		return ToolRefused, tools.Result{Content: fmt.Sprintf("The tool %q is not available in this turn.", call.Name)}
	}
	if call.Name == tools.DelegateName {
		return h.delegate(ctx, call)
	}
	if perm := t.Permission(); perm != "" {
		held, err := authority.Holds(ctx, h.deps.Client, h.bundle.MemberID, perm)
		if err != nil {
			return ToolFailed, tools.Result{Content: "The tool could not be run: the member's permissions could not be read."}
		}
		if !held {
			return ToolForbidden, tools.Result{Content: fmt.Sprintf("FORBIDDEN: the member does not hold the %q permission now, so %s was not run.", perm, call.Name)}
		}
	}
	if e, ok := t.(tools.Effectful); ok && e.NeedsApproval() {
		// The write guard passed (the permission, now); the approval gate
		// decides the rest.
		status, res, err := h.gate(ctx, call, t)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, lease.ErrFenced) {
				h.log.Warn("approval gate failed", "tool", call.Name, "err", err)
			}
			return ToolFailed, tools.Result{Content: "The approval for this call could not be completed."}
		}
		return status, res
	}
	return h.run(ctx, call, t, "")
}

// run executes a tool as the member, bounded in time, and maps its
// failure to what the model is told.
func (h *Host) run(ctx context.Context, call runtime.ToolCall, t tools.Tool, idempotencyKey string) (string, tools.Result) {
	tctx, cancel := context.WithTimeout(ctx, h.deps.ToolTimeout)
	defer cancel()
	res, err := t.Run(tctx, tools.Call{
		Actor: tools.Actor{MemberID: h.bundle.MemberID, Email: h.bundle.Email,
			ConversationID: h.claim.Turn.ConversationID, TurnID: h.claim.Turn.ID, Manifest: h.bundle.Manifest,
			Shared: h.bundle.ConversationKind == string(entconv.KindShared)},
		Arguments:      json.RawMessage(call.Arguments),
		DB:             h.deps.Client,
		Now:            h.deps.Now(),
		IdempotencyKey: idempotencyKey,
	})
	var refusal *tools.Refusal
	switch {
	case errors.As(err, &refusal):
		return refusal.Status, tools.Result{Content: refusal.Message}
	case errors.Is(err, tools.ErrBadArguments):
		return ToolBadArguments, tools.Result{Content: "The tool could not use its arguments: " + err.Error()}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return ToolFailed, tools.Result{Content: fmt.Sprintf("The tool did not finish within %s.", h.deps.ToolTimeout)}
	case err != nil:
		h.log.Warn("tool failed", "tool", call.Name, "err", err)
		return ToolFailed, tools.Result{Content: "The tool failed."}
	}
	return ToolOK, res
}

// documentsOf is every document a tool result derives from: those the
// tool says (Result.Documents) and those its citations name.
func documentsOf(res tools.Result) []uuid.UUID {
	docs := slices.Clone(res.Documents)
	for _, c := range res.Citations {
		if c.Document != uuid.Nil && !slices.Contains(docs, c.Document) {
			docs = append(docs, c.Document)
		}
	}
	return docs
}

// remember adds what a tool retrieved to the turn's evidence, with its
// lineage.
func (h *Host) remember(cs []tools.Citation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cs {
		h.evidence.Add(c.ID)
		h.lineage[c.ID] = c
	}
}

// settleArtifacts makes the files a tool made part of the answer. In a
// shared room each becomes an immutable room resource reference (room,
// artifact, digest) — made only after the initiating member's access to
// the room is re-checked under the room's lock, in the transaction that
// makes it; the files themselves stay the member's own records. A member
// no longer in the room gets no reference: the file stays theirs alone.
func (h *Host) settleArtifacts(ctx context.Context, refs []resource.ArtifactRef) error {
	if len(refs) == 0 {
		return nil
	}
	c := h.claim
	var made []journal.AnswerArtifact
	if h.bundle.ConversationKind != string(entconv.KindShared) {
		for _, a := range refs {
			made = append(made, journal.AnswerArtifact{ArtifactID: a.ID, Name: a.Name, MediaType: a.MediaType, Size: a.Size, SHA256: a.SHA256})
		}
	} else {
		tx, err := h.deps.Client.Tx(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR SHARE`, c.Turn.ConversationID); err != nil {
			return err
		}
		member, err := authority.IsMember(ctx, tx, c.Turn.ConversationID, h.bundle.MemberID)
		if err != nil {
			return err
		}
		if member {
			ids := make([]uuid.UUID, len(refs))
			for i, a := range refs {
				ids[i] = a.ID
			}
			// The same linking step invitation-time reconciliation uses.
			linked, err := resource.LinkToRoom(ctx, tx, c.Turn.ConversationID.String(), ids)
			if err != nil {
				return err
			}
			for _, a := range refs {
				for _, l := range linked {
					if l.ArtifactID == a.ID && l.Digest == a.SHA256 {
						made = append(made, journal.AnswerArtifact{ArtifactID: a.ID, ResourceID: l.ID, Name: a.Name, MediaType: a.MediaType, Size: a.Size, SHA256: a.SHA256})
					}
				}
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.artifacts = append(h.artifacts, made...)
	h.mu.Unlock()
	return nil
}

// holds reports whether the member holds a permission at this moment.
func jsonDecode(raw string, v any) error { return json.Unmarshal([]byte(raw), v) }
