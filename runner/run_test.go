package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/tools"
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
	if u := testkit.UsageOf(t, env.WaitTerminal(t, queued.ID)); u != (outcome.Usage{}) {
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
	if got.State != "failed" || got.TerminalReason == nil || *got.TerminalReason != outcome.ReasonRuntimeFailed {
		t.Fatalf("turn ended %s (%v), want failed: runtime_failed", got.State, got.TerminalReason)
	}
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}

// A replacement attempt resumes from the last durable checkpoint: the
// tool round the dead attempt finished is not run again, and the usage it
// recorded is settled with the terminal.
func TestReplacementAttemptResumesFromTheCheckpoint(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	secondStep := make(chan struct{}, 4)
	first := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if n == 1 {
			return &gateway.Result{FinishReason: "tool_calls", Usage: gateway.Usage{InputTokens: 10, OutputTokens: 5},
				ToolCalls: []gateway.ToolCall{{ID: "call_1", Name: tools.HistorySearchName, Arguments: `{"query":"news"}`}}}, nil
		}
		secondStep <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	r1 := env.Runner(t, runner.Config{Gateway: first.Gateway(), Drain: 10 * time.Millisecond})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "what is new?")
	<-secondStep
	r1.Stop() // detaches and hands the turn back
	if n := len(env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindCheckpoint)); n != 1 {
		t.Fatalf("%d checkpoints before the takeover, want 1", n)
	}

	second := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: second.Gateway()})
	done := env.WaitTerminal(t, tt.ID)
	if done.State != "completed" || done.Attempt != 2 {
		t.Fatalf("turn ended %s in attempt %d, want completed in attempt 2", done.State, done.Attempt)
	}
	reqs := second.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the new attempt made %d model calls, want 1 (the answer)", len(reqs))
	}
	sawResult := false
	for _, m := range reqs[0].Messages {
		if m.Role == "tool" && m.ToolCallID == "call_1" {
			sawResult = true
		}
	}
	if !sawResult {
		t.Fatal("the new attempt did not resume with the checkpointed tool result")
	}
	if n := len(env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindToolRequested)); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	if u := testkit.UsageOf(t, done); u.ToolCalls != 1 || u.ModelCalls != 2 || u.InputTokens < 10 {
		t.Fatalf("usage = %+v, want the dead attempt's checkpointed work included", u)
	}
}
