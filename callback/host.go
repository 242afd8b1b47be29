package callback

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/ent"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/metrics"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/tracing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// Host is the backend side of runtime.Callbacks for one run. Every
// call presents the run reference — turn, attempt, lease token and the
// digest of the turn's authority bundle — and anything but this run's exact
// reference is rejected, never reconciled: a different member,
// conversation, audience, agent or resource scope is a different digest,
// and a stale lease token is another run. Every write a callback makes is
// fenced by the lease token besides.
type Host struct {
	deps   Deps
	log    *slog.Logger
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
	usage outcome.Usage
	// offset is where the next model text starts in the attempt's answer;
	// held is text streamed but not yet appended, starting at heldAt.
	offset int
	held   string
	heldAt int

	// history is the room history the contract carries, summary the
	// room's stored summary at its head (zero when none). roomSummary is
	// the result of a compaction step this host ran over exactly that
	// history: the one summary a checkpoint may make the room's. notes
	// are entries that go out with the run's next journal write.
	history     []runtime.Message
	summary     Summary
	roomSummary *lease.RoomSummary
	// audience is the room's audience version the history was built for,
	// historyEvidence every document it derives from: a summary of it is
	// the room's for that audience, with that evidence.
	audience        int64
	historyEvidence []uuid.UUID
	notes           []journal.Draft
	// calls numbers the attempt's model calls as they are stored.
	calls int64
}

// Summary is the room's stored summary a run starts from: the position of
// the last turn it covers and how many turns that is.
type Summary struct {
	Through int64
	Turns   int64
}

// maxRoomSummary bounds, in bytes, the summary a room keeps.
const maxRoomSummary = 32 << 10

var _ runtime.Callbacks = (*Host)(nil)

// Deps are what every run's host shares: the runner's handles and limits.
type Deps struct {
	Client  *ent.Client
	Store   *lease.Store
	Hub     *journal.Hub
	Gateway *gateway.Gateway
	// Redactor is applied to every tool result the model reads and to
	// every answer, streamed or final.
	Redactor *guard.Redactor
	// MaxToolResult bounds, in bytes, what a tool result shows the model.
	MaxToolResult int
	// ToolTimeout bounds one tool call.
	ToolTimeout time.Duration
	// ApprovalTimeout bounds how long a proposed external effect waits
	// for a member's decision before it expires.
	ApprovalTimeout time.Duration
	// Poll is how often a wait for a decision looks again when no wake-up
	// came.
	Poll time.Duration
	// DeltaWindow and DeltaTokens bound how long and how many tokens model
	// output is held before it is appended as one answer_delta.
	DeltaWindow time.Duration
	DeltaTokens int
	// MaxRepeats is how often a run may repeat the identical tool call.
	MaxRepeats int
	// Owner names the runner in its leases; a completion renews for it.
	Owner string
	// Now is the clock of the turn's runtime context.
	Now    func() time.Time
	Logger *slog.Logger
	// AgentVersion reads an agent version (a delegation's specialist).
	AgentVersion func(ctx context.Context, id uuid.UUID) (*ent.AgentVersion, error)
	// Metrics counts model steps and tool calls; nil counts nothing.
	Metrics *metrics.Metrics
	// Tracer traces model steps, tool calls, approvals and the terminal
	// as children of the run's span (tracing.Or: never nil in a runner's
	// deps).
	Tracer trace.Tracer
}

// Run is what one host serves: the claimed turn, its run reference, its
// authority bundle, its agent version, and the tools its contract offers
// (the agent version's list, as far as the backend has them).
type Run struct {
	Claim   *lease.Claimed
	Ref     runtime.RunRef
	Bundle  authority.Bundle
	Version *ent.AgentVersion
	Tools   map[string]tools.Tool
	// History is the contract's room history, Summary the room summary at
	// its head (zero when the room has none or it was not for the room's
	// audience now).
	History []runtime.Message
	Summary Summary
	// Audience is the room's audience version History was built for —
	// only turns every member of that audience may read — and Evidence
	// every document History derives from (its turns' evidence and its
	// summary's).
	Audience int64
	Evidence []uuid.UUID
	// Log is the run's logger, whose lines carry its room, turn, attempt
	// and trace; nil logs to Deps.Logger with the room, turn and attempt.
	Log *slog.Logger
}

// New returns the host of one run.
func New(deps Deps, run Run) *Host {
	av := run.Version
	log := run.Log
	if log == nil {
		log = deps.Logger.With("room", run.Claim.Turn.ConversationID, "turn", run.Claim.Turn.ID, "attempt", run.Claim.Turn.Attempt)
	}
	h := &Host{deps: deps, log: log, claim: run.Claim, ref: run.Ref, bundle: run.Bundle,
		route: av.ModelRoute, effort: av.Effort, maxTokens: int(av.Budgets["max_tokens"]),
		tools: run.Tools, lineage: map[string]tools.Citation{},
		loop: guard.NewLoopGuard(deps.MaxRepeats, av.Tools),
		// One snapshot for the whole turn, taken when the run starts, so
		// every model call of the turn carries the same clock.
		turnContext: gateway.TurnContext(deps.Now(), run.Bundle.DisplayName),
		history:     run.History, summary: run.Summary, audience: run.Audience, historyEvidence: run.Evidence}
	if run.Summary.Through > 0 {
		// The run starts from the room's summary: the journal says so.
		h.notes = append(h.notes, journal.Draft{Kind: journal.KindCompaction, TurnID: h.turnID(), Attempt: run.Claim.Turn.Attempt,
			Payload: journal.CompactionPayload{Through: run.Summary.Through, Turns: run.Summary.Turns, Reused: true}})
	}
	return h
}

// historyCompaction reports whether a compaction request is of the
// contract's room history and nothing else (a turn's own tool results
// never become the room's), and returns the position it covers through
// and how many turns that is.
func (h *Host) historyCompaction(req runtime.ModelRequest) (through, turns int64, ok bool) {
	if req.Purpose != runtime.PurposeCompaction || len(h.history) == 0 {
		return 0, 0, false
	}
	through = h.history[len(h.history)-1].Position
	want := runtime.HistoryCompaction(h.history)
	if through <= 0 || len(req.Messages) != len(want) {
		return 0, 0, false
	}
	for i, m := range req.Messages {
		w := want[i]
		if m.Role != w.Role || m.Content != w.Content || len(m.ToolCalls) > 0 || m.ToolCallID != "" {
			return 0, 0, false
		}
	}
	turns = h.summary.Turns
	seen := int64(-1)
	for _, m := range h.history {
		if m.Position > h.summary.Through && m.Position != seen {
			turns++
			seen = m.Position
		}
	}
	return through, turns, true
}

// ErrRunMismatch rejects a callback whose run reference is not the run's.
var ErrRunMismatch = errors.New("callback run reference does not match the run")

func (h *Host) check(ref runtime.RunRef) error {
	if ref != h.ref {
		return ErrRunMismatch
	}
	return nil
}

// Committed reports whether the run committed its own terminal.
func (h *Host) Committed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.committed
}

// redact applies the configured redaction patterns.
func (h *Host) redact(s string) string {
	out, _ := h.deps.Redactor.Redact(s)
	return out
}

// Usage is what the turn has spent so far: what its last checkpoint
// recorded plus this attempt's work.
func (h *Host) Usage() outcome.Usage {
	if h == nil {
		return outcome.Usage{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.usage
}

func (h *Host) turnID() uuid.NullUUID {
	return uuid.NullUUID{UUID: h.claim.Turn.ID, Valid: true}
}

// Model runs one model step through the gateway. Answer steps stream their
// text into the journal as coalesced answer_delta entries, fenced by the
// lease; a compaction step's text is the controller's own and streams
// nowhere.
func (h *Host) Model(ctx context.Context, req runtime.ModelRequest, onDelta func(runtime.ModelDelta)) (runtime.ModelResult, error) {
	if err := h.check(req.Run); err != nil {
		return runtime.ModelResult{}, err
	}
	ctx, span := tracing.Or(h.deps.Tracer).Start(ctx, "model.step", trace.WithAttributes(
		attribute.String("turngate.route", h.route), attribute.String("turngate.purpose", req.Purpose)))
	defer span.End()
	step := h.modelStep(req, h.route, h.effort, false)
	var res gateway.Result
	var err error
	start := time.Now()
	// Compaction is the controller's own text and a correction replaces
	// the answer wholesale (the final turn_answer carries it): neither
	// streams.
	if req.Purpose == runtime.PurposeCompaction || req.Purpose == runtime.PurposeCorrection {
		res, err = h.deps.Gateway.Run(ctx, step, nil)
	} else {
		res, err = h.streamAnswer(ctx, step, onDelta)
	}
	h.recordCall(ctx, req.Purpose, h.route, step, res, err, time.Since(start))
	span.SetAttributes(attribute.Int("turngate.tokens_in", res.Usage.InputTokens), attribute.Int("turngate.tokens_out", res.Usage.OutputTokens))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "model step failed")
		return runtime.ModelResult{}, err
	}
	if through, turns, ok := h.historyCompaction(req); ok {
		h.mu.Lock()
		h.roomSummary = &lease.RoomSummary{Through: through, Turns: turns,
			Text:     guard.Bound(runtime.SummaryPrefix+res.Text, maxRoomSummary),
			Audience: h.audience, Evidence: h.historyEvidence}
		h.mu.Unlock()
	}
	return h.settle(res, ""), nil
}

// modelStep is the gateway step of a model request on route: only tools
// the contract offers are offered to the model (a nested controller never
// gets delegate), none once the loop guard stopped the tool loop (the
// model answers now), bounded by what is left of the turn's token budget.
func (h *Host) modelStep(req runtime.ModelRequest, route, effort string, nested bool) gateway.Step {
	greq := gateway.Request{Messages: h.messages(req.Messages), Effort: effort, Purpose: req.Purpose}
	for _, t := range req.Tools {
		if _, ok := h.tools[t.Name]; ok && !(nested && t.Name == tools.DelegateName) {
			greq.Tools = append(greq.Tools, gateway.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped != "" && !nested {
		greq.Tools = nil
	}
	return gateway.Step{Route: route, Request: greq, Bounded: h.maxTokens > 0,
		TokenBudget: h.maxTokens - h.usage.InputTokens - h.usage.OutputTokens}
}

// settle counts a model call and what it spent into the turn's usage, and
// maps its result to the runtime's; callPrefix marks the tool calls of a
// nested controller.
func (h *Host) settle(res gateway.Result, callPrefix string) runtime.ModelResult {
	h.mu.Lock()
	h.usage.ModelCalls++
	h.usage.InputTokens += res.Usage.InputTokens
	h.usage.OutputTokens += res.Usage.OutputTokens
	h.mu.Unlock()
	out := runtime.ModelResult{Text: res.Text, FinishReason: res.FinishReason, InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}
	for _, tc := range res.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, runtime.ToolCall{ID: callPrefix + tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out
}

// messages maps the runtime's messages to the gateway's. The runtime
// context goes on the message that started this turn and on no other: not
// on earlier turns, not on prompts the controller adds (compaction,
// correction, synthesis). The backend checks that the marked message
// really is the member's input.
func (h *Host) messages(in []runtime.Message) []gateway.Message {
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
func (h *Host) streamAnswer(ctx context.Context, step gateway.Step, onDelta func(runtime.ModelDelta)) (gateway.Result, error) {
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
	co := newCoalescer(h.deps.DeltaWindow, h.deps.DeltaTokens, offset, h.redact, func(text string, offset int) error {
		err := h.appendDelta(sctx, text, offset)
		if err != nil {
			stop(err)
		}
		return err
	})
	res, err := h.deps.Gateway.Run(sctx, step, func(d gateway.Delta) {
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
func (h *Host) flushHeld(ctx context.Context) error {
	drafts := h.takeHeld()
	if len(drafts) == 0 {
		return nil
	}
	return h.append(ctx, drafts...)
}

// takeHeld returns the held text as an answer_delta draft, if there is
// any, and forgets it.
// Notes waiting for the run's next write go out first.
func (h *Host) takeHeld() []journal.Draft {
	h.mu.Lock()
	defer h.mu.Unlock()
	drafts := h.notes
	h.notes = nil
	if h.held == "" {
		return drafts
	}
	d := journal.Draft{Kind: journal.KindAnswerDelta, TurnID: h.turnID(), Attempt: h.claim.Turn.Attempt,
		Payload: journal.DeltaPayload{Text: h.held, Offset: h.heldAt}}
	h.held = ""
	return append(drafts, d)
}

func (h *Host) appendDelta(ctx context.Context, text string, offset int) error {
	return h.append(ctx, journal.Draft{
		Kind: journal.KindAnswerDelta, TurnID: h.turnID(), Attempt: h.claim.Turn.Attempt,
		Payload: journal.DeltaPayload{Text: text, Offset: offset},
	})
}

// append commits entries of this run, fenced by its lease token. The
// append is one statement, atomic on its own: no transaction around it.
func (h *Host) append(ctx context.Context, drafts ...journal.Draft) error {
	c := h.claim
	entries, err := journal.Append(ctx, h.deps.Client, c.Turn.ConversationID, &c.Fence, drafts...)
	if err != nil {
		return err
	}
	h.deps.Hub.Committed(c.Turn.ConversationID, entries[len(entries)-1].Seq)
	return nil
}

// Complete commits the run's answer and its completed terminal, with the
// turn's usage, after one final renewal of the lease in the same
// transaction, so the terminal write keeps the authority the run held.
func (h *Host) Complete(ctx context.Context, comp runtime.Completion) (err error) {
	if err := h.check(comp.Run); err != nil {
		return err
	}
	ctx, span := tracing.Or(h.deps.Tracer).Start(ctx, "turn.terminal")
	defer func() {
		if err != nil {
			span.RecordError(err)
		}
		span.End()
	}()
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
	usage := h.Usage()
	if err := h.deps.Store.Terminal(ctx, lease.TerminalParams{
		Fence: c.Fence, State: entturn.StateCompleted, Reason: outcome.ReasonCompleted, Answer: &answer, Usage: &usage,
		Citations: citations, Artifacts: artifacts,
		RenewFor: h.deps.Owner, Before: h.takeHeld(),
	}); err != nil {
		return err
	}
	h.mu.Lock()
	h.committed = true
	h.mu.Unlock()
	return nil
}
