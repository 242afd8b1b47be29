package runner_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runner"
)

// Usage is settled with every terminal, whatever the outcome: no ended
// turn lacks it, and no running one has it.
func TestUsageIsSettledWithTheTerminal(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	gate := testkit.NewGatedModel()
	env.Runner(t, runner.Config{Gateway: gate.Gateway()})
	running := env.Submit(t, env.Alice, env.Shared.ID, "hold on")
	<-gate.Started
	queued := env.Submit(t, env.Alice, env.Shared.ID, "never mind")
	if got, _ := env.Client.Turn.Get(context.Background(), running.ID); len(got.Usage) != 0 {
		t.Fatalf("a running turn has usage %s", got.Usage)
	}
	if _, err := env.Turns.Cancel(context.Background(), env.Alice, uuid.New(), queued.ID); err != nil {
		t.Fatal(err)
	}
	if u := testkit.UsageOf(t, env.WaitTerminal(t, queued.ID)); u != (lease.Usage{}) {
		t.Fatalf("a turn cancelled before it ran spent %+v", u)
	}
	close(gate.Release)
	if u := testkit.UsageOf(t, env.WaitTerminal(t, running.ID)); u.ModelCalls != 1 {
		t.Fatalf("usage = %+v, want one model call", u)
	}
	var unsettled int
	if err := env.DB.QueryRow(`SELECT count(*) FROM turns WHERE state IN ('completed', 'failed', 'cancelled') AND usage IS NULL`).Scan(&unsettled); err != nil {
		t.Fatal(err)
	}
	if unsettled != 0 {
		t.Fatalf("%d ended turns have no usage", unsettled)
	}
}

// An agent version naming a controller the runtime does not have is
// refused at admission: the turn ends failed, and no model is called.
func TestUnknownControllerIsRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "plugin-from-disk", nil, nil)
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "hello")
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "failed" || got.TerminalReason == nil || *got.TerminalReason != lease.ReasonRuntimeFailed {
		t.Fatalf("turn ended %s (%v), want failed: runtime_failed", got.State, got.TerminalReason)
	}
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}
