package turn

import (
	"context"
	"errors"
	"sync"

	entturn "github.com/turngate/turngate/ent/turn"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// callbackHost is the backend side of runtime.Callbacks for one run. Every
// call presents the run reference — turn, attempt, lease token and the
// digest of the turn's authority bundle — and anything but this run's exact
// reference is rejected, never reconciled: a different member,
// conversation, audience, agent or resource scope is a different digest,
// and a stale lease token is another run. Every write a callback makes is
// fenced by the lease token besides.
type callbackHost struct {
	r      *Runner
	claim  *lease.Claimed
	ref    runtime.RunRef
	bundle authority.Bundle
	route  string
	effort string
	// maxTokens is the run's token budget; zero is unbounded.
	maxTokens int
	// tools are the tools the contract offers: the agent version's list,
	// as far as the backend has them.
	tools map[string]tools.Tool
	// turnContext rides on the turn's own message in every model request;
	// it is never stored.
	turnContext string

	// evidence is what this turn's tools retrieved, by citation id, with
	// its lineage; loop guards the tool calls; stopped is set when it
	// stopped the loop: no more tools are offered.
	evidence guard.Evidence
	lineage  map[string]tools.Citation
	loop     *guard.LoopGuard

	mu        sync.Mutex
	committed bool
	stopped   string
	corrected bool
	// artifacts are the files the turn's tools made, as the answer will
	// reference them.
	artifacts []journal.AnswerArtifact
	// usage is what the turn has spent: what its last checkpoint recorded
	// plus this attempt's work.
	usage lease.Usage
	// offset is where the next model text starts in the attempt's answer;
	// held is text streamed but not yet appended, starting at heldAt.
	offset int
	held   string
	heldAt int
}

var _ runtime.Callbacks = (*callbackHost)(nil)

// ErrRunMismatch rejects a callback whose run reference is not the run's.
var ErrRunMismatch = errors.New("callback run reference does not match the run")

func (h *callbackHost) check(ref runtime.RunRef) error {
	if ref != h.ref {
		return ErrRunMismatch
	}
	return nil
}

func (h *callbackHost) terminalCommitted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.committed
}

// redact applies the configured redaction patterns.
func (h *callbackHost) redact(s string) string {
	out, _ := h.r.cfg.Redactor.Redact(s)
	return out
}

func (h *callbackHost) usageNow() lease.Usage {
	if h == nil {
		return lease.Usage{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.usage
}

func (h *callbackHost) turnID() uuid.NullUUID {
	return uuid.NullUUID{UUID: h.claim.Turn.ID, Valid: true}
}

// Model runs one model step through the gateway. Answer steps stream their
// text into the journal as coalesced answer_delta entries, fenced by the
// lease; a compaction step's text is the controller's own and streams
// nowhere.
func (h *callbackHost) Model(ctx context.Context, req runtime.ModelRequest, onDelta func(runtime.ModelDelta)) (runtime.ModelResult, error) {
	if err := h.check(req.Run); err != nil {
		return runtime.ModelResult{}, err
	}
	greq := gateway.Request{Messages: h.messages(req.Messages), Effort: h.effort, Purpose: req.Purpose}
	for _, t := range req.Tools {
		// Only tools the contract offers are offered to the model.
		if _, ok := h.tools[t.Name]; ok {
			greq.Tools = append(greq.Tools, gateway.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	h.mu.Lock()
	step := gateway.Step{Route: h.route, Request: greq, Bounded: h.maxTokens > 0,
		TokenBudget: h.maxTokens - h.usage.InputTokens - h.usage.OutputTokens}
	h.mu.Unlock()

	h.mu.Lock()
	if h.stopped != "" {
		// The loop guard stopped the tool loop: the model answers now.
		step.Request.Tools = nil
	}
	h.mu.Unlock()
	var res gateway.Result
	var err error
	// Compaction is the controller's own text and a correction replaces
	// the answer wholesale (the final turn_answer carries it): neither
	// streams.
	if req.Purpose == runtime.PurposeCompaction || req.Purpose == runtime.PurposeCorrection {
		res, err = h.r.cfg.Gateway.Run(ctx, step, nil)
	} else {
		res, err = h.streamAnswer(ctx, step, onDelta)
	}
	if err != nil {
		return runtime.ModelResult{}, err
	}
	h.mu.Lock()
	h.usage.ModelCalls++
	h.usage.InputTokens += res.Usage.InputTokens
	h.usage.OutputTokens += res.Usage.OutputTokens
	h.mu.Unlock()
	out := runtime.ModelResult{Text: res.Text, FinishReason: res.FinishReason, InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}
	for _, tc := range res.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, runtime.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out, nil
}

// messages maps the runtime's messages to the gateway's. The runtime
// context goes on the message that started this turn and on no other: not
// on earlier turns, not on prompts the controller adds (compaction,
// correction, synthesis). The backend checks that the marked message
// really is the member's input.
func (h *callbackHost) messages(in []runtime.Message) []gateway.Message {
	msgs := make([]gateway.Message, len(in))
	for i, m := range in {
		msgs[i] = gateway.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, gateway.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		if m.Origin == runtime.OriginTurn && m.Role == runtime.RoleUser && m.Content == h.claim.Turn.Input {
			msgs[i].Context = h.turnContext
		}
	}
	return msgs
}

// streamAnswer runs a step whose text is answer text, appending it to the
// journal as it streams.
func (h *callbackHost) streamAnswer(ctx context.Context, step gateway.Step, onDelta func(runtime.ModelDelta)) (gateway.Result, error) {
	// A delta the journal refuses (the lease is gone) stops the model
	// step at once: nothing more of this run may be published.
	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// Text held back by the previous step goes out before this one's.
	if err := h.flushHeld(sctx); err != nil {
		return gateway.Result{}, err
	}
	h.mu.Lock()
	offset := h.offset
	h.mu.Unlock()
	co := newCoalescer(h.r.cfg.DeltaWindow, h.r.cfg.DeltaTokens, offset, h.redact, func(text string, offset int) error {
		err := h.appendDelta(sctx, text, offset)
		if err != nil {
			stop(err)
		}
		return err
	})
	res, err := h.r.cfg.Gateway.Run(sctx, step, func(d gateway.Delta) {
		if d.Text == "" {
			return
		}
		co.add(d.Text)
		if onDelta != nil {
			onDelta(runtime.ModelDelta{Text: d.Text})
		}
	})
	// The step's last text is held rather than committed on its own: if
	// the run completes next, it rides in the terminal transaction (one
	// commit fewer per turn); if anything else follows, it goes out first.
	held, heldAt, ferr := co.hold()
	if ferr != nil {
		err = ferr // the cause, rather than the cancellation it caused
	}
	if err != nil {
		return gateway.Result{}, err
	}
	h.mu.Lock()
	h.held, h.heldAt, h.offset = held, heldAt, heldAt+len(held)
	h.mu.Unlock()
	return res, nil
}

// flushHeld appends the text a previous step held back.
func (h *callbackHost) flushHeld(ctx context.Context) error {
	drafts := h.takeHeld()
	if len(drafts) == 0 {
		return nil
	}
	return h.append(ctx, drafts...)
}

// takeHeld returns the held text as an answer_delta draft, if there is
// any, and forgets it.
func (h *callbackHost) takeHeld() []journal.Draft {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == "" {
		return nil
	}
	d := journal.Draft{Kind: journal.KindAnswerDelta, TurnID: h.turnID(), Attempt: h.claim.Turn.Attempt,
		Payload: journal.DeltaPayload{Text: h.held, Offset: h.heldAt}}
	h.held = ""
	return []journal.Draft{d}
}

func (h *callbackHost) appendDelta(ctx context.Context, text string, offset int) error {
	return h.append(ctx, journal.Draft{
		Kind: journal.KindAnswerDelta, TurnID: h.turnID(), Attempt: h.claim.Turn.Attempt,
		Payload: journal.DeltaPayload{Text: text, Offset: offset},
	})
}

// append commits entries of this run, fenced by its lease token. The
// append is one statement, atomic on its own: no transaction around it.
func (h *callbackHost) append(ctx context.Context, drafts ...journal.Draft) error {
	c := h.claim
	entries, err := journal.Append(ctx, h.r.cfg.Client, c.Turn.ConversationID, &c.Fence, drafts...)
	if err != nil {
		return err
	}
	h.r.cfg.Hub.Committed(c.Turn.ConversationID, entries[len(entries)-1].Seq)
	return nil
}

// Complete commits the run's answer and its completed terminal, with the
// turn's usage, after one final renewal of the lease in the same
// transaction, so the terminal write keeps the authority the run held.
func (h *callbackHost) Complete(ctx context.Context, comp runtime.Completion) error {
	if err := h.check(comp.Run); err != nil {
		return err
	}
	c := h.claim
	// Citation discipline: only sources retrieved in this turn may be
	// cited; an answer that cites none of the evidence gathered gets one
	// correction step.
	checked := guard.CheckCitations(comp.Answer, &h.evidence)
	h.mu.Lock()
	correct := checked.NeedsCorrection && !h.corrected
	h.corrected = h.corrected || correct
	artifacts := append([]journal.AnswerArtifact(nil), h.artifacts...)
	h.mu.Unlock()
	if correct {
		return &runtime.CorrectionNeeded{Prompt: guard.CorrectionPrompt(h.evidence.IDs())}
	}
	answer := h.redact(checked.Text)
	citations := make([]journal.AnswerCitation, 0, len(checked.Cited))
	for _, id := range checked.Cited {
		l := h.lineage[id]
		citations = append(citations, journal.AnswerCitation{ID: id, Document: l.Document, Source: h.redact(l.Source), Passage: h.redact(l.Passage), Digest: l.Digest})
	}
	usage := h.usageNow()
	if err := h.r.store.Terminal(ctx, lease.TerminalParams{
		Fence: c.Fence, State: entturn.StateCompleted, Reason: lease.ReasonCompleted, Answer: &answer, Usage: &usage,
		Citations: citations, Artifacts: artifacts,
		RenewFor: h.r.cfg.Owner, Before: h.takeHeld(),
	}); err != nil {
		return err
	}
	h.mu.Lock()
	h.committed = true
	h.mu.Unlock()
	return nil
}
