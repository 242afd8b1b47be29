package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runtime"
)

// errDetached is the cause of a run's cancellation when its runner stops.
var errDetached = errors.New("runner stopping: detached from the run")

// run drives one claimed turn to its terminal, or hands it back.
func (r *Runner) run(ctx context.Context, c *Claimed) {
	log := r.log.With("turn", c.Turn.ID, "attempt", c.Turn.Attempt)
	if c.Turn.Attempt > r.cfg.MaxAttempts {
		// Its runs keep dying: one safe terminal instead of another try.
		r.fail(c, ReasonRecoveryExhausted, log)
		return
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	host, contract, err := r.admit(runCtx, c)
	if err != nil {
		log.Error("admitting run failed", "err", err)
		r.fail(c, ReasonRuntimeFailed, log)
		return
	}

	var watchers sync.WaitGroup
	watchers.Add(2)
	go func() {
		defer watchers.Done()
		r.heartbeat(runCtx, c, cancel)
	}()
	go func() {
		defer watchers.Done()
		r.watchCommands(runCtx, c, cancel)
	}()
	err = runtime.Run(runCtx, contract, host)
	cancel(nil)
	watchers.Wait()

	var cancelled errCancelRequested
	switch cause := context.Cause(runCtx); {
	case host.terminalCommitted():
		// The run committed its own terminal. If only a later renewal
		// failed, that terminal stands: a finished answer is never
		// relabelled as failed.
	case errors.As(cause, &cancelled):
		// A member's durable cancel: the only thing that aborts a run.
		err := CommitTerminal(context.Background(), r.cfg.Client, r.cfg.Hub, c.Fence, Outcome{
			State: "cancelled", Reason: ReasonCancelled, Command: uuid.NullUUID{UUID: cancelled.command, Valid: true},
		})
		if err != nil && !errors.Is(err, ErrFenced) {
			log.Warn("recording the cancelled terminal", "err", err)
		}
	case errors.Is(cause, errDetached):
		// The runner is stopping; that is not member intent. Hand the
		// turn back, fenced, so another runner takes it over now.
		if rerr := Release(context.Background(), r.cfg.Client, r.cfg.Hub, c.Fence); rerr != nil && !errors.Is(rerr, ErrFenced) {
			log.Warn("releasing turn on stop failed; it is recovered when its lease expires", "err", rerr)
		}
	case errors.Is(cause, ErrLeaseLost) || errors.Is(err, ErrFenced) || errors.Is(err, ErrLeaseLost):
		r.fail(c, ReasonInputLeaseLost, log)
	default:
		log.Error("run failed", "err", err)
		r.fail(c, ReasonRuntimeFailed, log)
	}
}

// fail records a failed terminal, fenced by the run's token: it lands only
// while no other runner has re-claimed the turn; otherwise the outcome is
// the new owner's to decide.
func (r *Runner) fail(c *Claimed, reason string, log interface{ Warn(string, ...any) }) {
	err := CommitTerminal(context.Background(), r.cfg.Client, r.cfg.Hub, c.Fence, Outcome{State: "failed", Reason: reason})
	if err != nil && !errors.Is(err, ErrFenced) {
		log.Warn("recording failed terminal", "reason", reason, "err", err)
	}
}

// heartbeat renews the lease until the run ends. A failed renewal cancels
// the run with ErrLeaseLost, which stops any further publication.
func (r *Runner) heartbeat(ctx context.Context, c *Claimed, cancel context.CancelCauseFunc) {
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := Renew(ctx, r.cfg.Client, c.Fence, r.cfg.Owner, r.cfg.LeaseTTL.Seconds())
		switch {
		case errors.Is(err, ErrLeaseLost):
			cancel(ErrLeaseLost)
			return
		case err != nil && ctx.Err() == nil:
			// A renewal that cannot reach the database may still leave the
			// lease alive; the next tick tries again, and expiry decides.
			r.log.Warn("lease renewal failed", "turn", c.Turn.ID, "err", err)
		}
	}
}

// admit builds the run's immutable contract and its callback host.
func (r *Runner) admit(ctx context.Context, c *Claimed) (*callbackHost, runtime.Contract, error) {
	var b authority.Bundle
	if err := json.Unmarshal(c.Turn.AuthorityBundle, &b); err != nil {
		return nil, runtime.Contract{}, fmt.Errorf("decode authority bundle: %w", err)
	}
	av, err := r.cfg.Client.AgentVersion.Get(ctx, c.Turn.AgentVersionID)
	if err != nil {
		return nil, runtime.Contract{}, fmt.Errorf("agent version: %w", err)
	}
	history, err := r.history(ctx, c.Turn)
	if err != nil {
		return nil, runtime.Contract{}, err
	}
	ref := runtime.RunRef{TurnID: c.Turn.ID.String(), Attempt: c.Turn.Attempt, LeaseToken: c.Fence.LeaseToken, BundleDigest: c.Turn.AuthorityDigest}
	contract := runtime.Contract{
		Run:        ref,
		Controller: av.Controller,
		System:     av.SystemPrompt,
		History:    history,
		Message:    runtime.Message{Role: "user", Content: c.Turn.Input, Origin: runtime.OriginTurn},
		Budgets:    runtime.Budgets{MaxSteps: int(av.Budgets["max_steps"]), MaxTokens: int(av.Budgets["max_tokens"])},
	}
	if err := runtime.Admit(contract); err != nil {
		return nil, runtime.Contract{}, err
	}
	h := &callbackHost{r: r, claim: c, ref: ref, route: av.ModelRoute, effort: av.Effort,
		// One snapshot for the whole turn, taken when the run starts, so
		// every model call of the turn carries the same clock.
		turnContext: gateway.TurnContext(r.cfg.Now(), b.DisplayName)}
	return h, contract, nil
}

// history is the room's earlier finished turns, oldest first.
func (r *Runner) history(ctx context.Context, t *ent.Turn) ([]runtime.Message, error) {
	prev, err := r.cfg.Client.Turn.Query().
		Where(entturn.ConversationID(t.ConversationID), entturn.PositionLT(t.Position), entturn.StateEQ(entturn.StateCompleted)).
		Order(ent.Desc(entturn.FieldPosition)).
		Limit(r.cfg.HistoryTurns).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	out := make([]runtime.Message, 0, 2*len(prev))
	for i := len(prev) - 1; i >= 0; i-- {
		out = append(out, runtime.Message{Role: "user", Content: prev[i].Input})
		if prev[i].Answer != nil {
			out = append(out, runtime.Message{Role: "assistant", Content: *prev[i].Answer})
		}
	}
	return out, nil
}

// callbackHost is the backend side of runtime.Callbacks for one run. Every
// call presents the run reference; anything but this run's exact reference
// is rejected.
type callbackHost struct {
	r      *Runner
	claim  *Claimed
	ref    runtime.RunRef
	route  string
	effort string
	// turnContext rides on the turn's own message in every model request;
	// it is never stored.
	turnContext string

	mu        sync.Mutex
	committed bool
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

// Model runs one model step through the gateway and streams its text into
// the journal as coalesced answer_delta entries, fenced by the lease.
func (h *callbackHost) Model(ctx context.Context, req runtime.ModelRequest, onDelta func(runtime.ModelDelta)) (runtime.ModelResult, error) {
	if err := h.check(req.Run); err != nil {
		return runtime.ModelResult{}, err
	}
	msgs := make([]gateway.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = gateway.Message{Role: m.Role, Content: m.Content}
		// The runtime context goes on the message that started this turn
		// and on no other: not on earlier turns, not on prompts the
		// controller adds. The backend checks that the marked message
		// really is the member's input.
		if m.Origin == runtime.OriginTurn && m.Role == "user" && m.Content == h.claim.Turn.Input {
			msgs[i].Context = h.turnContext
		}
	}
	// A delta the journal refuses (the lease is gone) stops the model
	// step at once: nothing more of this run may be published.
	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// Text held back by the previous step goes out before this one's.
	if err := h.flushHeld(sctx); err != nil {
		return runtime.ModelResult{}, err
	}
	co := newCoalescer(h.r.cfg.DeltaWindow, h.r.cfg.DeltaTokens, h.offset, func(text string, offset int) error {
		err := h.appendDelta(sctx, text, offset)
		if err != nil {
			stop(err)
		}
		return err
	})
	res, err := h.r.cfg.Gateway.Stream(sctx, h.route, gateway.Request{Messages: msgs, Effort: h.effort}, func(d gateway.Delta) {
		co.add(d.Text)
		if onDelta != nil {
			onDelta(runtime.ModelDelta{Text: d.Text})
		}
	})
	// The step's last text is held rather than committed on its own: if
	// the run completes next, it rides in the terminal transaction (one
	// commit fewer per turn); if another step follows, it goes out first.
	held, heldAt, ferr := co.hold()
	if ferr != nil {
		err = ferr // the cause, rather than the cancellation it caused
	}
	if err != nil {
		return runtime.ModelResult{}, err
	}
	h.mu.Lock()
	h.held, h.heldAt, h.offset = held, heldAt, heldAt+len(held)
	h.mu.Unlock()
	return runtime.ModelResult{Text: res.Text, FinishReason: res.FinishReason, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens}, nil
}

// flushHeld appends the text a previous step held back.
func (h *callbackHost) flushHeld(ctx context.Context) error {
	h.mu.Lock()
	text, at := h.held, h.heldAt
	h.held = ""
	h.mu.Unlock()
	if text == "" {
		return nil
	}
	return h.appendDelta(ctx, text, at)
}

// heldDraft is the held text as an answer_delta draft, if there is any.
func (h *callbackHost) heldDraft() []journal.Draft {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == "" {
		return nil
	}
	c := h.claim
	return []journal.Draft{{
		Kind: journal.KindAnswerDelta, TurnID: uuid.NullUUID{UUID: c.Turn.ID, Valid: true}, Attempt: c.Turn.Attempt,
		Payload: DeltaPayload{Text: h.held, Offset: h.heldAt},
	}}
}

func (h *callbackHost) appendDelta(ctx context.Context, text string, offset int) error {
	c := h.claim
	tx, err := h.r.cfg.Client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	entries, err := journal.Append(ctx, tx, c.Turn.ConversationID, &c.Fence, journal.Draft{
		Kind: journal.KindAnswerDelta, TurnID: uuid.NullUUID{UUID: c.Turn.ID, Valid: true}, Attempt: c.Turn.Attempt,
		Payload: DeltaPayload{Text: text, Offset: offset},
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

// Complete commits the run's answer and its completed terminal, after one
// final renewal of the lease in the same transaction, so the terminal write
// keeps the authority the run held.
func (h *callbackHost) Complete(ctx context.Context, comp runtime.Completion) error {
	if err := h.check(comp.Run); err != nil {
		return err
	}
	c := h.claim
	answer := comp.Answer
	if err := CommitTerminal(ctx, h.r.cfg.Client, h.r.cfg.Hub, c.Fence, Outcome{
		State: "completed", Reason: ReasonCompleted, Answer: &answer,
		RenewFor: h.r.cfg.Owner, RenewTTL: h.r.cfg.LeaseTTL, Before: h.heldDraft(),
	}); err != nil {
		return err
	}
	h.mu.Lock()
	h.committed = true
	h.mu.Unlock()
	return nil
}

// coalescer gathers streamed tokens into bounded answer_delta writes: one
// write per window of time or count of tokens, whichever comes first.
type coalescer struct {
	window time.Duration
	max    int
	write  func(text string, offset int) error

	mu     sync.Mutex
	buf    strings.Builder
	n      int
	offset int
	timer  *time.Timer
	err    error
	closed bool

	flushMu sync.Mutex
}

func newCoalescer(window time.Duration, max, offset int, write func(string, int) error) *coalescer {
	return &coalescer{window: window, max: max, offset: offset, write: write}
}

func (c *coalescer) add(text string) {
	c.mu.Lock()
	if c.err != nil || c.closed {
		c.mu.Unlock()
		return
	}
	c.buf.WriteString(text)
	c.n++
	if c.n == 1 {
		c.timer = time.AfterFunc(c.window, c.flush)
	}
	full := c.n >= c.max
	c.mu.Unlock()
	if full {
		c.flush()
	}
}

func (c *coalescer) flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	text, offset := c.buf.String(), c.offset
	c.buf.Reset()
	c.n = 0
	c.offset += len(text)
	failed := c.err != nil || c.closed
	c.mu.Unlock()
	if text == "" || failed {
		return
	}
	if err := c.write(text, offset); err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
}

// hold ends the coalescer without writing what is left: it returns that
// text and its offset, and the first write failure. Nothing is written
// after it returns.
func (c *coalescer) hold() (string, int, error) {
	c.flushMu.Lock() // wait for a flush in progress
	defer c.flushMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.closed = true
	text := c.buf.String()
	c.buf.Reset()
	c.n = 0
	return text, c.offset, c.err
}
