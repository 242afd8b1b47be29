package runner_test

// One test per row of the seed's table "What survives what" that runs
// inside one process; the rows about processes (forced loss, kill -9) are
// in server/survive_test.go.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/runner"
)

func activeTurn(t *testing.T, env *testkit.Env, room uuid.UUID) uuid.NullUUID {
	t.Helper()
	var id uuid.NullUUID
	if err := env.DB.QueryRow(`SELECT active_turn_id FROM conversations WHERE id = $1`, room).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Row "Input lease lost while the runner is alive": the runtime is stopped
// and the turn ends failed with input_lease_lost, and the room is released.
func TestLeaseLostWhileRunnerAlive(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	gate := testkit.NewGatedModel()
	env.Runner(t, runner.Config{Gateway: gate.Gateway(), LeaseTTL: time.Minute, Heartbeat: 20 * time.Millisecond})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "lose my lease")
	<-gate.Started
	// The lease runs out under the live runner (a stall, a clock jump):
	// its next heartbeat finds it expired.
	if _, err := env.DB.Exec(`UPDATE turns SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "failed" || got.TerminalReason == nil || *got.TerminalReason != outcome.ReasonInputLeaseLost {
		t.Fatalf("turn ended %s (%v), want failed input_lease_lost", got.State, got.TerminalReason)
	}
	if got.Answer != nil {
		t.Fatalf("a lost-lease turn stored an answer: %q", *got.Answer)
	}
	if a := activeTurn(t, env, env.Shared.ID); a.Valid {
		t.Fatalf("room still has active turn %s", a.UUID)
	}
	if k := env.Kinds(t, tt.ID); k[journal.KindTurnTerminal] != 1 || k[journal.KindTurnAnswer] != 0 {
		t.Fatalf("journal kinds %v, want one terminal and no answer", k)
	}
}

// Row "lease lost after the runtime committed its terminal": heartbeats
// racing the terminal commit (a renewal that finds the turn finished) never
// relabel a finished answer as failed.
func TestLeaseLostAfterTerminalKeepsAnswer(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Runner(t, runner.Config{Heartbeat: time.Millisecond})
	var ids []uuid.UUID
	for range 8 {
		ids = append(ids, env.Submit(t, env.Alice, env.Shared.ID, "finish, then lose the lease").ID)
	}
	for _, id := range ids {
		if got := env.WaitTerminal(t, id); got.State != "completed" || got.Answer == nil {
			t.Fatalf("turn %s ended %s (%v)", id, got.State, got.TerminalReason)
		}
		if k := env.Kinds(t, id); k[journal.KindTurnTerminal] != 1 {
			t.Fatalf("turn %s has %d terminals", id, k[journal.KindTurnTerminal])
		}
	}
}

// Row "Forced pod loss" at the database level: after the old lease
// expires a present client's recovery fences the old run (its writes
// fail) and a new attempt completes the turn; before expiry nothing is
// reclaimed.
func TestRecoveryFencesTheOldRun(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "my runner will die")
	dead := env.ClaimHead(t, tt.ID, "dead-runner")
	r := env.Runner(t, runner.Config{Owner: "rescuer"})

	// The dead runner's lease is still live: nothing may take the turn.
	if took, err := r.Resume(ctx, tt.ID); err != nil || took {
		t.Fatalf("resume of a live lease: took=%v err=%v, want no takeover", took, err)
	}
	if _, err := lease.NewStore(env.Client, env.Hub).Recover(ctx, lease.RecoverParams{TurnID: tt.ID, Owner: "x", TTL: time.Minute, Grace: 0}); !errors.Is(err, lease.ErrNotRecoverable) {
		t.Fatalf("recover of a live lease: %v, want ErrNotRecoverable", err)
	}

	if _, err := env.DB.Exec(`UPDATE turns SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	// Expired one second ago: too soon for the background salvage (one
	// further lease period), not for a present client.
	if _, err := lease.NewStore(env.Client, env.Hub).Recover(ctx, lease.RecoverParams{TurnID: tt.ID, Owner: "x", TTL: time.Minute, Grace: time.Minute}); !errors.Is(err, lease.ErrNotRecoverable) {
		t.Fatalf("salvage before one further lease period: %v, want ErrNotRecoverable", err)
	}
	if took, err := r.Resume(ctx, tt.ID); err != nil || !took {
		t.Fatalf("resume of an expired lease: took=%v err=%v", took, err)
	}
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "completed" || got.Attempt != 2 || got.LeaseOwner != nil && *got.LeaseOwner != "rescuer" {
		t.Fatalf("recovered turn: state %s attempt %d owner %v", got.State, got.Attempt, got.LeaseOwner)
	}
	// The dead runner wakes up: everything it tries is fenced.
	answer := "zombie answer"
	if err := lease.NewStore(env.Client, env.Hub).Terminal(ctx, lease.TerminalParams{Fence: dead.Fence, State: "completed", Answer: &answer}); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("old run's terminal: %v, want ErrFenced", err)
	}
	if _, err := journal.Append(ctx, env.DB, env.Shared.ID, &dead.Fence, journal.Draft{Kind: journal.KindAnswerDelta}); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("old run's delta: %v, want ErrFenced", err)
	}
	k := env.Kinds(t, tt.ID)
	if k[journal.KindTurnTerminal] != 1 || k[journal.KindTurnStarted] != 2 {
		t.Fatalf("journal kinds %v, want 2 starts and 1 terminal", k)
	}
}

// Row "Forced pod loss ... with no browser": the background worker
// salvages the run after one further lease period.
func TestSalvageWithoutClient(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	tt := env.Submit(t, env.Alice, env.Shared.ID, "nobody is watching")
	env.ClaimHead(t, tt.ID, "dead-runner")
	// Expired for longer than one further lease period of the runner below.
	if _, err := env.DB.Exec(`UPDATE turns SET lease_expires_at = now() - interval '3 seconds' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	env.Runner(t, runner.Config{Owner: "sweeper", LeaseTTL: 2 * time.Second, Poll: 50 * time.Millisecond})
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "completed" || got.Attempt != 2 {
		t.Fatalf("salvaged turn: state %s attempt %d", got.State, got.Attempt)
	}
}

// A turn whose runs keep dying ends in one safe terminal instead of
// starting again and again.
func TestRecoveryExhaustedEndsSafely(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "cursed")
	env.ClaimHead(t, tt.ID, "dead-1")
	if _, err := env.DB.Exec(`UPDATE turns SET attempt = 3, lease_expires_at = now() - interval '1 second' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	r := env.Runner(t, runner.Config{MaxAttempts: 3})
	if took, err := r.Resume(ctx, tt.ID); err != nil || !took {
		t.Fatalf("resume: took=%v err=%v", took, err)
	}
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "failed" || *got.TerminalReason != outcome.ReasonRecoveryExhausted {
		t.Fatalf("turn ended %s (%v), want failed %s", got.State, got.TerminalReason, outcome.ReasonRecoveryExhausted)
	}
	if a := activeTurn(t, env, env.Shared.ID); a.Valid {
		t.Fatal("room still busy after the safe terminal")
	}
}

// Row "Membership revoked mid-turn": re-checked before publication; the
// answer is refused.
func TestMembershipRevokedMidTurn(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	gate := testkit.NewGatedModel()
	env.Runner(t, runner.Config{Gateway: gate.Gateway()})
	tt := env.Submit(t, env.Bob, env.Shared.ID, "tell me secrets")
	<-gate.Started
	if _, err := env.Rooms.RemoveMember(ctx, env.Alice, env.Shared.ID.String(), env.Bob.Email); err != nil {
		t.Fatal(err)
	}
	close(gate.Release)
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "failed" || got.TerminalReason == nil || *got.TerminalReason != outcome.ReasonMembershipRevoked {
		t.Fatalf("turn ended %s (%v), want failed %s", got.State, got.TerminalReason, outcome.ReasonMembershipRevoked)
	}
	if got.Answer != nil {
		t.Fatalf("answer stored for a removed member: %q", *got.Answer)
	}
	if k := env.Kinds(t, tt.ID); k[journal.KindTurnAnswer] != 0 || k[journal.KindTurnTerminal] != 1 {
		t.Fatalf("journal kinds %v: an answer was published, or not one terminal", k)
	}
}

// endlessModel streams a word every few milliseconds until its run's
// context ends; stopped is closed when it does.
type endlessModel struct {
	started, stopped chan struct{}
}

func (m *endlessModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	defer close(m.stopped)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		emit(gateway.Delta{Text: "word "})
		if i == 20 {
			close(m.started)
		}
		select {
		case <-ctx.Done():
			return gateway.Result{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// TestMembershipRevokedStopsTheRunAtOnce: removing the author from the
// room mid-answer ends the turn with the removal: no entry of that turn
// but its membership_revoked terminal comes after member_left — the
// remaining members read none of the removed member's later text — and
// the run's model call is stopped.
func TestMembershipRevokedStopsTheRunAtOnce(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	model := &endlessModel{started: make(chan struct{}), stopped: make(chan struct{})}
	env.Runner(t, runner.Config{Gateway: gateway.New(map[string]gateway.Provider{"builtin": model})})
	tt := env.Submit(t, env.Bob, env.Shared.ID, "keep talking")
	<-model.started
	if _, err := env.Rooms.RemoveMember(ctx, env.Alice, env.Shared.ID.String(), env.Bob.Email); err != nil {
		t.Fatal(err)
	}
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "failed" || got.TerminalReason == nil || *got.TerminalReason != outcome.ReasonMembershipRevoked || got.Answer != nil {
		t.Fatalf("turn ended %s (%v), answer %v; want failed %s without an answer", got.State, got.TerminalReason, got.Answer, outcome.ReasonMembershipRevoked)
	}
	select {
	case <-model.stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the removed member's model call is still streaming")
	}
	var left int64
	var after []journal.Kind
	for _, e := range env.Entries(t, env.Shared.ID) {
		if e.Kind == journal.KindMemberLeft {
			left = e.Seq
		}
		if left > 0 && e.Seq > left && e.TurnID.Valid && e.TurnID.UUID == tt.ID {
			after = append(after, e.Kind)
		}
	}
	if left == 0 || len(after) != 1 || after[0] != journal.KindTurnTerminal {
		t.Fatalf("entries of the turn after member_left (seq %d): %v; want only its terminal", left, after)
	}
}

// A runner whose own run of a turn is still going — paused past its
// lease, say, and not yet aware it lost it — takes the turn over as one
// new attempt: the stale run is fenced and stopped, recording nothing, and
// the new attempt runs in the slot it gives back (before, the takeover
// found no slot, handed the turn back to its lane and cost a second
// attempt). Another runner then finds the lease live. The turn completes
// on attempt 2 with two turn_started entries and one terminal.
func TestTakeoverCostsOneAttempt(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	gate := testkit.NewGatedModel()
	a := env.Runner(t, runner.Config{Owner: "paused", Gateway: gate.Gateway(), LeaseTTL: time.Minute, Heartbeat: time.Hour})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "take me over once")
	<-gate.Started
	// The lease runs out while the owner's run still goes on.
	if _, err := env.DB.Exec(`UPDATE turns SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	if took, err := a.Resume(ctx, tt.ID); err != nil || !took {
		t.Fatalf("the owner's runner did not take its expired turn over: took=%v err=%v", took, err)
	}
	if k := env.Kinds(t, tt.ID); k[journal.KindTurnStarted] != 2 {
		t.Fatalf("%d turn_started after the takeover, want 2", k[journal.KindTurnStarted])
	}
	b := env.Runner(t, runner.Config{Owner: "other"})
	if took, err := b.Resume(ctx, tt.ID); err != nil || took {
		t.Fatalf("another runner took over a live run: took=%v err=%v", took, err)
	}
	close(gate.Release)
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "completed" || got.Attempt != 2 {
		t.Fatalf("turn %s on attempt %d, want completed on attempt 2", got.State, got.Attempt)
	}
	if k := env.Kinds(t, tt.ID); k[journal.KindTurnStarted] != 2 || k[journal.KindTurnTerminal] != 1 {
		t.Fatalf("journal kinds %v: want 2 turn_started and 1 terminal", k)
	}
}

// Row "Orderly backend/runtime termination": a run that finishes within
// the drain period completes on the stopping runner.
func TestOrderlyStopDrainsRuns(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	gate := testkit.NewGatedModel()
	r := env.Runner(t, runner.Config{Owner: "draining", Gateway: gate.Gateway(), Drain: time.Minute})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "finish before you go")
	<-gate.Started
	stopped := make(chan struct{})
	go func() { r.Stop(); close(stopped) }()
	close(gate.Release)
	<-stopped
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "completed" || got.Attempt != 1 {
		t.Fatalf("drained turn: %s attempt %d, want completed on attempt 1", got.State, got.Attempt)
	}
}

// failingModel streams a little and then fails, like a runtime that dies
// mid-turn.
type failingModel struct{}

func (failingModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	emit(gateway.Delta{Text: "half an "})
	return gateway.Result{}, errors.New("model backend went away")
}

// Row "Runtime failure mid-turn": one safe terminal (failed), the room
// released, and the next turn in the lane runs.
func TestRuntimeFailureEndsOnce(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Runner(t, runner.Config{Gateway: gateway.New(map[string]gateway.Provider{"builtin": failingModel{}})})
	first := env.Submit(t, env.Alice, env.Shared.ID, "fail me")
	second := env.Submit(t, env.Bob, env.Shared.ID, "and me after")
	for _, id := range []uuid.UUID{first.ID, second.ID} {
		got := env.WaitTerminal(t, id)
		if got.State != "failed" || got.TerminalReason == nil || *got.TerminalReason != outcome.ReasonRuntimeFailed {
			t.Fatalf("turn ended %s (%v), want failed %s", got.State, got.TerminalReason, outcome.ReasonRuntimeFailed)
		}
		if k := env.Kinds(t, id); k[journal.KindTurnTerminal] != 1 || k[journal.KindTurnAnswer] != 0 {
			t.Fatalf("journal kinds %v", k)
		}
	}
}
