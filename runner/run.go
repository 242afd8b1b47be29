package runner

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/ent"
	entconv "github.com/turngate/turngate/ent/conversation"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
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
		r.fail(c, outcome.ReasonRecoveryExhausted, log)
		return
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	r.active[c.Turn.ID] = &activeRun{cancel: cancel, done: make(chan struct{})}
	r.mu.Unlock()

	host, contract, err := r.Admit(runCtx, c)
	if errors.Is(err, lease.ErrFenced) {
		// Another run owns the turn now: its outcome is that run's.
		log.Info("run fenced out at admission", "err", err)
		return
	}
	if err != nil {
		log.Error("admitting run failed", "err", err)
		r.fail(c, outcome.ReasonRuntimeFailed, log)
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
			Fence: c.Fence, State: entturn.StateCancelled, Reason: outcome.ReasonCancelled, Command: uuid.NullUUID{UUID: cancelled.command, Valid: true},
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
		r.failWith(c, outcome.ReasonInputLeaseLost, host, log)
	case errors.Is(err, runtime.ErrBudgetExhausted) || errors.Is(err, runtime.ErrWallTime) || errors.Is(err, gateway.ErrBudgetExhausted):
		r.failWith(c, outcome.ReasonBudgetExhausted, host, log)
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
		{gateway.ErrProviderRateLimited, outcome.ReasonModelRateLimited},
		{gateway.ErrProviderUnavailable, outcome.ReasonModelUnavailable},
		{gateway.ErrProviderAuth, outcome.ReasonModelAuthFailed},
		{gateway.ErrStreamCut, outcome.ReasonModelStreamCut},
		{gateway.ErrStreamIdle, outcome.ReasonModelStreamIdle},
		{gateway.ErrUnknownRoute, outcome.ReasonModelRouteInvalid},
		{gateway.ErrModelNotAllowed, outcome.ReasonModelRouteInvalid},
	} {
		if errors.Is(err, m.err) {
			return m.reason
		}
	}
	return outcome.ReasonRuntimeFailed
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
	history, err := r.history(ctx, c.Turn)
	if err != nil {
		return nil, runtime.Contract{}, err
	}
	var files string
	var given []uuid.UUID
	if len(b.Manifest.Artifacts) > 0 {
		files, given = r.attachments(ctx, b)
	}
	// What the turn is given — its history, the documents and the files
	// selected as its input — is its evidence before any of it reaches
	// the model.
	if err := r.store.AddEvidence(ctx, lease.EvidenceParams{Claim: c,
		Documents: append(slices.Clone(b.Manifest.Documents), history.Evidence...), Artifacts: given}); err != nil {
		return nil, runtime.Contract{}, fmt.Errorf("evidence of %s: %w", c.Turn.ID, err)
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
		History: history.Messages, Summary: history.Summary, Audience: history.Audience, Evidence: history.Evidence,
		Log: r.runLog(ctx, c)})
	contract := runtime.Contract{
		Run:          ref,
		AgentVersion: av.Version,
		Controller:   av.Controller,
		System:       av.SystemPrompt,
		History:      history.Messages,
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
	contract.System += files
	if err := h.Resume(ctx, &contract); err != nil {
		return nil, runtime.Contract{}, err
	}
	return h, contract, nil
}

// historyQuery reads what a run sees of its room's earlier turns, built
// for the room's audience now: its audience version, then the room's
// summary, when one covers turns before this one, was built for that
// audience version and draws only on documents every current member may
// read now, and the finished turns after it, newest first, each only when
// every current member may read all of its evidence now
// (authority.TurnAudienceReadableSQL). The summary is the row of kind
// 's'; each row carries the evidence it derives from. A summary of
// unknown evidence is not used. One statement: the audience version and
// the membership the rules read are of one snapshot.
var historyQuery = `
WITH room AS (
  SELECT audience_version FROM conversations WHERE id = $1),
s AS (
  SELECT rs.through_position, rs.summary, rs.turns, rs.evidence FROM room_summaries rs, room
  WHERE rs.conversation_id = $1 AND rs.through_position < $2 AND rs.audience_version = room.audience_version
    AND ` + authority.EvidenceAudienceReadableSQL("rs.evidence", "$1") + `),
h AS (
  (SELECT 's' AS kind, through_position AS position, summary AS input, NULL::text AS answer, turns,
     ARRAY(SELECT jsonb_array_elements_text(evidence)) AS evidence FROM s)
  UNION ALL
  (SELECT 't', t.position, t.input, t.answer, 0,
     ARRAY(SELECT ev.document_id::text FROM turn_evidence ev WHERE ev.conversation_id = t.conversation_id AND ev.turn_id = t.id)
   FROM turns t
   WHERE t.conversation_id = $1 AND t.position < $2 AND t.state = 'completed'
     AND t.position > coalesce((SELECT through_position FROM s), -1)
     AND ` + authority.TurnAudienceReadableSQL("t.conversation_id", "t.id", "$1") + `
   ORDER BY t.position DESC LIMIT $3))
SELECT room.audience_version, h.kind, h.position, h.input, h.answer, h.turns, h.evidence
FROM room LEFT JOIN h ON true`

// roomHistory is what a run sees of its room's earlier finished turns.
type roomHistory struct {
	// Messages are oldest first: the room's summary, when it has one the
	// audience may read, then the turns after it, each message with its
	// turn's position.
	Messages []runtime.Message
	Summary  callback.Summary
	// Audience is the room's audience version the history was built for;
	// Evidence every document it derives from.
	Audience int64
	Evidence []uuid.UUID
}

// history is what a run sees of the room's earlier finished turns: only
// what every current member of the room may read.
func (r *Runner) history(ctx context.Context, t *ent.Turn) (roomHistory, error) {
	var out roomHistory
	rows, err := r.cfg.Client.QueryContext(ctx, historyQuery, t.ConversationID, t.Position, r.cfg.HistoryTurns)
	if err != nil {
		return out, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	defer rows.Close()
	var prev []runtime.Message // newest first
	var summary *runtime.Message
	seen := map[uuid.UUID]bool{}
	for rows.Next() {
		var kind, input sql.NullString
		var position, turns sql.NullInt64
		var answer *string
		var evidence pq.StringArray
		if err := rows.Scan(&out.Audience, &kind, &position, &input, &answer, &turns, &evidence); err != nil {
			return out, err
		}
		for _, raw := range evidence {
			id, err := uuid.Parse(raw)
			if err != nil {
				return out, fmt.Errorf("history of %s: evidence %q: %w", t.ID, raw, err)
			}
			if !seen[id] {
				seen[id] = true
				out.Evidence = append(out.Evidence, id)
			}
		}
		switch kind.String {
		case "s":
			summary = &runtime.Message{Role: runtime.RoleSystem, Content: input.String, Position: position.Int64}
			out.Summary = callback.Summary{Through: position.Int64, Turns: turns.Int64}
		case "t":
			if answer != nil {
				prev = append(prev, runtime.Message{Role: runtime.RoleAssistant, Content: *answer, Position: position.Int64})
			}
			prev = append(prev, runtime.Message{Role: runtime.RoleUser, Content: input.String, Position: position.Int64})
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("history of %s: %w", t.ID, err)
	}
	if summary != nil {
		prev = append(prev, *summary)
	}
	slices.Reverse(prev)
	out.Messages = prev
	return out, nil
}

// maxAttachments bounds the attachment lines a prompt gets.
const maxAttachments = 20

// attachments describes the artifacts the member selected as input:
// bounded metadata, re-authorised now — in a shared room for every
// member — never their bytes (run_code reads those, digest-verified). It
// returns the artifacts it describes: what the turn is given of them.
func (r *Runner) attachments(ctx context.Context, b authority.Bundle) (string, []uuid.UUID) {
	var given []uuid.UUID
	var sb strings.Builder
	sb.WriteString("\n\nFiles the member attached to their message (run_code can read them with read_input(name)):")
	for i, id := range b.Manifest.Artifacts {
		if i == maxAttachments {
			fmt.Fprintf(&sb, "\n- and %d more", len(b.Manifest.Artifacts)-i)
			break
		}
		ref, err := resource.StatArtifact(ctx, r.cfg.Client, b.MemberID, id)
		if err == nil && b.ConversationKind == string(entconv.KindShared) {
			// A shared room's model context holds only what every member
			// may read: not a file drawn from what one of them may not.
			var shared bool
			if shared, err = resource.AudienceMayRead(ctx, r.cfg.Client, id, b.ConversationID); err == nil && !shared {
				err = resource.ErrArtifactNotFound
			}
		}
		if err != nil {
			fmt.Fprintf(&sb, "\n- artifact:%s (no longer available)", id)
			continue
		}
		fmt.Fprintf(&sb, "\n- %s (%s, %d bytes, sha256 %.12s, artifact:%s)", guard.Bound(ref.Name, 128), ref.MediaType, ref.Size, ref.SHA256, ref.ID)
		given = append(given, id)
	}
	return sb.String(), given
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
