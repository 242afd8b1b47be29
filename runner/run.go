package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/ent"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/tracing"
)

// errDetached is the cause of a run's cancellation when its runner stops.
var errDetached = errors.New("runner stopping: detached from the run")

// errSuperseded is the cause of a run's cancellation when this runner took
// its turn over as a new attempt: the run had outlived its lease (paused,
// say) and the new attempt owns the turn.
var errSuperseded = errors.New("superseded by a takeover of its turn")

// run drives one claimed turn to its terminal, or hands it back.
func (r *Runner) run(ctx context.Context, c *lease.Claimed) {
	var waited time.Duration
	if c.Turn.StartedAt != nil {
		waited = c.Turn.StartedAt.Sub(c.Turn.CreatedAt)
	}
	r.cfg.Metrics.Started(c.Turn.Attempt, waited)
	// The attempt continues the turn's trace from its acceptance, on
	// whichever replica that was.
	ctx, span := tracing.Or(r.cfg.Tracer).Start(tracing.WithParent(ctx, c.Turn.TraceParent), "turn.run", trace.WithAttributes(
		attribute.String("turngate.room", c.Turn.ConversationID.String()), attribute.String("turngate.turn", c.Turn.ID.String()),
		attribute.Int("turngate.attempt", c.Turn.Attempt), attribute.String("turngate.runner", r.cfg.Owner)))
	defer span.End()
	log := r.runLog(ctx, c)
	if c.Turn.Attempt > r.cfg.MaxAttempts {
		// Its runs keep dying: one safe terminal instead of another try.
		r.fail(c, lease.ReasonRecoveryExhausted, log)
		return
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	r.active[c.Turn.ID] = &activeRun{cancel: cancel, done: make(chan struct{})}
	r.mu.Unlock()

	host, contract, err := r.Admit(runCtx, c)
	if err != nil {
		log.Error("admitting run failed", "err", err)
		r.fail(c, lease.ReasonRuntimeFailed, log)
		return
	}

	// The first look for a cancel happens before the run starts, so one
	// already waiting stops the run before its first step. Later commands
	// wake the watcher.
	wake := r.cfg.Hub.Commands().Wait(c.Turn.ID)
	r.checkCommands(runCtx, c, cancel)

	var watchers sync.WaitGroup
	watchers.Add(2)
	go func() {
		defer watchers.Done()
		r.heartbeat(runCtx, c, cancel, log)
	}()
	go func() {
		defer watchers.Done()
		r.watchCommands(runCtx, c, cancel, wake)
	}()
	err = runtime.Run(runCtx, contract, host)
	cancel(nil)
	watchers.Wait()
	if cause := context.Cause(runCtx); err != nil && !host.Committed() {
		span.RecordError(err)
		span.SetStatus(codes.Error, fmt.Sprint(cause))
	}

	var cancelled errCancelRequested
	switch cause := context.Cause(runCtx); {
	case host.Committed():
		// The run committed its own terminal. If only a later renewal
		// failed, that terminal stands: a finished answer is never
		// relabelled as failed.
	case errors.Is(cause, errSuperseded):
		// A new attempt of this runner owns the turn: nothing to record.
	case errors.As(cause, &cancelled):
		// A member's durable cancel: the only thing that aborts a run.
		usage := host.Usage()
		err := r.store.Terminal(context.Background(), lease.TerminalParams{
			Fence: c.Fence, State: entturn.StateCancelled, Reason: lease.ReasonCancelled, Command: uuid.NullUUID{UUID: cancelled.command, Valid: true},
			Usage: &usage,
		})
		if err != nil && !errors.Is(err, lease.ErrFenced) {
			log.Warn("recording the cancelled terminal", "err", err)
		}
	case errors.Is(cause, errDetached):
		// The runner is stopping; that is not member intent. Hand the
		// turn back, fenced, so another runner takes it over now.
		if rerr := r.store.Release(context.Background(), lease.ReleaseParams{Fence: c.Fence}); rerr != nil && !errors.Is(rerr, lease.ErrFenced) {
			log.Warn("releasing turn on stop failed; it is recovered when its lease expires", "err", rerr)
		}
	case errors.Is(cause, lease.ErrLeaseLost) || errors.Is(err, lease.ErrFenced) || errors.Is(err, lease.ErrLeaseLost):
		r.failWith(c, lease.ReasonInputLeaseLost, host, log)
	case errors.Is(err, runtime.ErrBudgetExhausted) || errors.Is(err, runtime.ErrWallTime) || errors.Is(err, gateway.ErrBudgetExhausted):
		r.failWith(c, lease.ReasonBudgetExhausted, host, log)
	default:
		log.Error("run failed", "err", err)
		r.failWith(c, failureReason(err), host, log)
	}
}

// failureReason names a run's failure by its cause: the model gateway's
// errors each have their own reason, anything else is runtime_failed.
func failureReason(err error) string {
	for _, m := range []struct {
		err    error
		reason string
	}{
		{gateway.ErrProviderRateLimited, lease.ReasonModelRateLimited},
		{gateway.ErrProviderUnavailable, lease.ReasonModelUnavailable},
		{gateway.ErrProviderAuth, lease.ReasonModelAuthFailed},
		{gateway.ErrStreamCut, lease.ReasonModelStreamCut},
		{gateway.ErrStreamIdle, lease.ReasonModelStreamIdle},
		{gateway.ErrUnknownRoute, lease.ReasonModelRouteInvalid},
		{gateway.ErrModelNotAllowed, lease.ReasonModelRouteInvalid},
	} {
		if errors.Is(err, m.err) {
			return m.reason
		}
	}
	return lease.ReasonRuntimeFailed
}

// failWith records a failed terminal with the usage the run spent.
func (r *Runner) failWith(c *lease.Claimed, reason string, h *callback.Host, log interface{ Warn(string, ...any) }) {
	usage := h.Usage()
	err := r.store.Terminal(context.Background(), lease.TerminalParams{Fence: c.Fence, State: entturn.StateFailed, Reason: reason, Usage: &usage})
	if err != nil && !errors.Is(err, lease.ErrFenced) {
		log.Warn("recording failed terminal", "reason", reason, "err", err)
	}
}

// fail records a failed terminal, fenced by the run's token: it lands only
// while no other runner has re-claimed the turn; otherwise the outcome is
// the new owner's to decide.
func (r *Runner) fail(c *lease.Claimed, reason string, log interface{ Warn(string, ...any) }) {
	err := r.store.Terminal(context.Background(), lease.TerminalParams{Fence: c.Fence, State: entturn.StateFailed, Reason: reason})
	if err != nil && !errors.Is(err, lease.ErrFenced) {
		log.Warn("recording failed terminal", "reason", reason, "err", err)
	}
}

// heartbeat renews the lease until the run ends. A failed renewal cancels
// the run with lease.ErrLeaseLost, which stops any further publication.
// runLog is the logger of c's run: its lines carry the room, turn and
// attempt, and the trace and span of ctx's run span (tracing on), to find
// them from a trace.
func (r *Runner) runLog(ctx context.Context, c *lease.Claimed) *slog.Logger {
	log := r.log.With("room", c.Turn.ConversationID, "turn", c.Turn.ID, "attempt", c.Turn.Attempt)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		log = log.With("trace", sc.TraceID().String(), "span", sc.SpanID().String())
	}
	return log
}

func (r *Runner) heartbeat(ctx context.Context, c *lease.Claimed, cancel context.CancelCauseFunc, log *slog.Logger) {
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.store.Renew(ctx, lease.RenewParams{Fence: c.Fence, Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL.Seconds()})
		switch {
		case errors.Is(err, lease.ErrLeaseLost):
			cancel(lease.ErrLeaseLost)
			return
		case err != nil && ctx.Err() == nil:
			// A renewal that cannot reach the database may still leave the
			// lease alive; the next tick tries again, and expiry decides.
			log.Warn("lease renewal failed", "err", err)
		}
	}
}

// Admit builds a claimed turn's immutable run contract and the callback
// host that serves it — what run hands to runtime.Run. The stored bundle
// must still hash to the turn's digest: a bundle that does not is refused,
// never reconciled.
func (r *Runner) Admit(ctx context.Context, c *lease.Claimed) (*callback.Host, runtime.Contract, error) {
	var b authority.Bundle
	if err := json.Unmarshal(c.Turn.AuthorityBundle, &b); err != nil {
		return nil, runtime.Contract{}, fmt.Errorf("decode authority bundle: %w", err)
	}
	if digest, _, err := b.Digest(); err != nil || digest != c.Turn.AuthorityDigest {
		return nil, runtime.Contract{}, fmt.Errorf("authority bundle of %s does not match its digest", c.Turn.ID)
	}
	av, err := r.agentVersion(ctx, c.Turn.AgentVersionID)
	if err != nil {
		return nil, runtime.Contract{}, fmt.Errorf("agent version: %w", err)
	}
	history, summary, err := r.history(ctx, c.Turn)
	if err != nil {
		return nil, runtime.Contract{}, err
	}
	ref := runtime.RunRef{TurnID: c.Turn.ID.String(), Attempt: c.Turn.Attempt, LeaseToken: c.Fence.LeaseToken, BundleDigest: c.Turn.AuthorityDigest}
	offered := map[string]tools.Tool{}
	var specs []runtime.ToolSpec
	for _, s := range r.cfg.Tools.Specs(av.Tools) {
		t, _ := r.cfg.Tools.Get(s.Name)
		offered[s.Name] = t
		specs = append(specs, runtime.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	h := callback.New(r.deps, callback.Run{Claim: c, Ref: ref, Bundle: b, Version: av, Tools: offered,
		History: history, Summary: summary, Log: r.runLog(ctx, c)})
	contract := runtime.Contract{
		Run:          ref,
		AgentVersion: av.Version,
		Controller:   av.Controller,
		System:       av.SystemPrompt,
		History:      history,
		Message:      runtime.Message{Role: runtime.RoleUser, Content: c.Turn.Input, Origin: runtime.OriginTurn},
		Tools:        specs,
		Budgets: runtime.Budgets{
			MaxSteps:      int(av.Budgets["max_steps"]),
			MaxToolCalls:  int(av.Budgets["max_tool_calls"]),
			MaxTokens:     int(av.Budgets["max_tokens"]),
			WallTimeMs:    av.Budgets["wall_time_ms"],
			ContextTokens: int(av.Budgets["context_tokens"]),
		},
	}
	if err := runtime.Admit(contract); err != nil {
		return nil, runtime.Contract{}, err
	}
	if len(b.Manifest.Artifacts) > 0 {
		contract.System += r.attachments(ctx, b)
	}
	if err := h.Resume(ctx, &contract); err != nil {
		return nil, runtime.Contract{}, err
	}
	return h, contract, nil
}

// historyQuery reads the room's summary, when one covers turns before
// this one, and the finished turns after it, newest first: the summary is
// the row with a null answer and kind 's'.
const historyQuery = `
WITH s AS (
  SELECT through_position, summary, turns FROM room_summaries
  WHERE conversation_id = $1 AND through_position < $2)
(SELECT 's' AS kind, through_position, summary, NULL::text, turns FROM s)
UNION ALL
(SELECT 't', position, input, answer, 0 FROM turns
 WHERE conversation_id = $1 AND position < $2 AND state = 'completed'
   AND position > coalesce((SELECT through_position FROM s), -1)
 ORDER BY position DESC LIMIT $3)`

// history is what a run sees of the room's earlier finished turns, oldest
// first: the room's summary, when it has one, then the turns after it,
// each message with its turn's position.
func (r *Runner) history(ctx context.Context, t *ent.Turn) ([]runtime.Message, callback.Summary, error) {
	var sum callback.Summary
	rows, err := r.cfg.Client.QueryContext(ctx, historyQuery, t.ConversationID, t.Position, r.cfg.HistoryTurns)
	if err != nil {
		return nil, sum, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	defer rows.Close()
	var prev []runtime.Message // newest first
	var summary *runtime.Message
	for rows.Next() {
		var kind, input string
		var position, turns int64
		var answer *string
		if err := rows.Scan(&kind, &position, &input, &answer, &turns); err != nil {
			return nil, sum, err
		}
		if kind == "s" {
			summary = &runtime.Message{Role: runtime.RoleSystem, Content: input, Position: position}
			sum = callback.Summary{Through: position, Turns: turns}
			continue
		}
		if answer != nil {
			prev = append(prev, runtime.Message{Role: runtime.RoleAssistant, Content: *answer, Position: position})
		}
		prev = append(prev, runtime.Message{Role: runtime.RoleUser, Content: input, Position: position})
	}
	if err := rows.Err(); err != nil {
		return nil, sum, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	if summary != nil {
		prev = append(prev, *summary)
	}
	slices.Reverse(prev)
	return prev, sum, nil
}

// maxAttachments bounds the attachment lines a prompt gets.
const maxAttachments = 20

// attachments describes the artifacts the member selected as input:
// bounded metadata, re-authorised now — never their bytes (run_code reads
// those, digest-verified).
func (r *Runner) attachments(ctx context.Context, b authority.Bundle) string {
	var sb strings.Builder
	sb.WriteString("\n\nFiles the member attached to their message (run_code can read them with read_input(name)):")
	for i, id := range b.Manifest.Artifacts {
		if i == maxAttachments {
			fmt.Fprintf(&sb, "\n- and %d more", len(b.Manifest.Artifacts)-i)
			break
		}
		ref, err := resource.StatArtifact(ctx, r.cfg.Client, b.MemberID, id)
		if err != nil {
			fmt.Fprintf(&sb, "\n- artifact:%s (no longer available)", id)
			continue
		}
		fmt.Fprintf(&sb, "\n- %s (%s, %d bytes, sha256 %.12s, artifact:%s)", guard.Bound(ref.Name, 128), ref.MediaType, ref.Size, ref.SHA256, ref.ID)
	}
	return sb.String()
}

// agentVersion reads an agent version. Versions are immutable (the
// database refuses any change), so each is read once per runner.
func (r *Runner) agentVersion(ctx context.Context, id uuid.UUID) (*ent.AgentVersion, error) {
	if av, ok := r.versions.Load(id); ok {
		return av.(*ent.AgentVersion), nil
	}
	av, err := r.cfg.Client.AgentVersion.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	r.versions.Store(id, av)
	return av, nil
}
