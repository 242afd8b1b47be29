package callback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	roompkg "github.com/turngate/turngate/room"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// searchEveryStep asks for history_search whenever tools are offered.
func searchEveryStep(_ context.Context, n int, req gateway.Request) (*gateway.Result, error) {
	if len(req.Tools) == 0 {
		return nil, nil
	}
	return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
		{ID: fmt.Sprintf("call_%d", n), Name: tools.HistorySearchName, Arguments: `{"query":"plan"}`}}}, nil
}

// The clock snapshot and the member's name ride on the message that
// started the turn, on every model call of the turn — the first, the one
// after a tool result, the forced synthesis — and on no other message: not
// on tool results, not on the synthesis prompt, not on earlier turns in
// the next turn's requests. Nothing of it is stored.
func TestClockAndNameRulesOnEveryCallOfATurn(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.HistorySearchName}, map[string]int64{"max_steps": 2})
	model := &testkit.ScriptModel{Script: searchEveryStep}
	clock := time.Date(2026, 12, 4, 9, 30, 0, 0, time.FixedZone("CET", 3600))
	env.Runner(t, runner.Config{Gateway: model.Gateway(), Now: func() time.Time { return clock }})

	first := env.Submit(t, env.Alice, env.Shared.ID, "what is the plan?")
	if got := env.WaitTerminal(t, first.ID); got.State != "completed" {
		t.Fatalf("first turn ended %s (%v): a spent step budget must end in forced synthesis, not failure", got.State, got.TerminalReason)
	}
	second := env.Submit(t, env.Bob, env.Shared.ID, "and tomorrow?")
	env.WaitTerminal(t, second.ID)

	reqs := model.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d model requests, want 3 per turn (two steps, one synthesis)", len(reqs))
	}
	wantClock := "Friday, 4 December 2026, 08:30 UTC (timezone: UTC)"
	for i, req := range reqs {
		input, name := "what is the plan?", "Alice"
		if i >= 3 {
			input, name = "and tomorrow?", "Bob"
		}
		carried := 0
		for _, m := range req.Messages {
			if m.Context == "" {
				continue
			}
			carried++
			if m.Content != input || m.Role != "user" {
				t.Errorf("request %d: context on %s message %q, want only on the turn's own", i, m.Role, m.Content)
			}
			if !strings.Contains(m.Context, wantClock) || !strings.Contains(m.Context, `"`+name+`"`) {
				t.Errorf("request %d: context %q, want the UTC clock %q and the name %q", i, m.Context, wantClock, name)
			}
		}
		if carried != 1 {
			t.Errorf("request %d (%s): %d messages carry context, want exactly 1", i, req.Purpose, carried)
		}
	}
	// The call after a tool result carries it, and the result does not.
	afterTool := reqs[1].Messages
	if last := afterTool[len(afterTool)-1]; last.Role != "tool" || last.Context != "" {
		t.Errorf("second call ends with %+v, want the bare tool result", last)
	}
	// The synthesis call: no tools, the host's prompt last, bare.
	synth := reqs[2]
	if synth.Purpose != runtime.PurposeSynthesis || len(synth.Tools) != 0 {
		t.Errorf("third call purpose %q with %d tools, want synthesis without tools", synth.Purpose, len(synth.Tools))
	}
	if last := synth.Messages[len(synth.Messages)-1]; last.Content != runtime.SynthesisPrompt || last.Context != "" {
		t.Errorf("synthesis ends with %+v, want the bare synthesis prompt", last)
	}
	// The next turn sees the first as history, bare.
	sawHistory := false
	for _, m := range reqs[3].Messages {
		if m.Content == "what is the plan?" {
			sawHistory = true
			if m.Context != "" {
				t.Errorf("an earlier turn's message carries context %q", m.Context)
			}
		}
	}
	if !sawHistory {
		t.Error("the second turn's request does not include the first turn")
	}
	for _, e := range env.Entries(t, env.Shared.ID) {
		if strings.Contains(string(e.Payload), "Current date and time") || strings.Contains(string(e.Payload), "timezone: UTC") || strings.Contains(string(e.Payload), "not an instruction") {
			t.Errorf("journal entry %d (%s) stores the runtime context: %s", e.Seq, e.Kind, e.Payload)
		}
	}
}

// The builtin model asks for a search when a question could use earlier
// material, the backend runs it as the member over the rooms they are in
// now, the journal shows the tool activity, and the answer cites what was
// found. A member of no shared room finds nothing of it.
func TestToolActivityIsJournaledAndCited(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	env.Runner(t, runner.Config{})
	fact := env.Submit(t, env.Alice, env.Shared.ID, "The launch moves to Friday the 11th.")
	env.WaitTerminal(t, fact.ID)

	ask := env.Submit(t, env.Bob, env.Shared.ID, "When is the launch?")
	done := env.WaitTerminal(t, ask.ID)
	requested := env.EntriesOf(t, env.Shared.ID, ask.ID, journal.KindToolRequested)
	completed := env.EntriesOf(t, env.Shared.ID, ask.ID, journal.KindToolCompleted)
	if len(requested) != 1 || len(completed) != 1 || requested[0].Seq > completed[0].Seq {
		t.Fatalf("tool entries: %d requested, %d completed", len(requested), len(completed))
	}
	var tc journal.ToolCompletedPayload
	if err := json.Unmarshal(completed[0].Payload, &tc); err != nil {
		t.Fatal(err)
	}
	cite := "turn:" + fact.ID.String()
	if tc.Status != callback.ToolOK || len(tc.Citations) == 0 || tc.Citations[0] != cite {
		t.Fatalf("tool_completed = %+v, want ok citing %s", tc, cite)
	}
	if done.Answer == nil || !strings.Contains(*done.Answer, "["+cite+"]") || !strings.Contains(*done.Answer, "Friday the 11th") {
		t.Fatalf("answer %v does not quote and cite %s", done.Answer, cite)
	}
	if u := testkit.UsageOf(t, done); u.ModelCalls != 2 || u.ToolCalls != 1 || u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Fatalf("usage = %+v, want 2 model calls and 1 tool call", u)
	}

	// Mallory is in no room with that message: her search finds nothing.
	mallory := env.NewMember(t, "mallory@example.com")
	room, err := env.Rooms.Create(context.Background(), mallory, roompkg.NewInput{Title: "mine", Kind: "private"})
	if err != nil {
		t.Fatal(err)
	}
	hers := env.Submit(t, mallory, room.ID, "When is the launch?")
	env.WaitTerminal(t, hers.ID)
	for _, e := range env.EntriesOf(t, room.ID, hers.ID, journal.KindToolCompleted) {
		if strings.Contains(string(e.Payload), fact.ID.String()) {
			t.Fatalf("a non-member's search found the shared room's turn: %s", e.Payload)
		}
	}
}

// When the conversation would exceed the context budget, the controller
// asks for a compaction step first — a step that carries no runtime
// context and streams nothing — and the journal records what it
// summarised.
func TestCompactionIsJournaled(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	for i := range 3 {
		tt := env.Submit(t, env.Alice, env.Shared.ID, fmt.Sprintf("note %d: %s", i, strings.Repeat("lorem ipsum ", 30)))
		env.WaitTerminal(t, tt.ID)
	}
	env.Agent(t, "react", nil, map[string]int64{"context_tokens": 200})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "sum it up")
	done := env.WaitTerminal(t, tt.ID)
	if done.State != "completed" {
		t.Fatalf("turn ended %s", done.State)
	}
	comp := env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindCompaction)
	if len(comp) != 1 {
		t.Fatalf("%d compaction entries, want 1", len(comp))
	}
	var p journal.CompactionPayload
	if err := json.Unmarshal(comp[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.Summarised != 6 || p.TokensAfter >= p.TokensBefore {
		t.Fatalf("compaction = %+v, want the 6 messages of 3 earlier turns summarised, smaller after", p)
	}
	reqs := model.Requests()
	compaction := reqs[len(reqs)-2]
	if compaction.Purpose != runtime.PurposeCompaction {
		t.Fatalf("second-to-last request is %q, want compaction", compaction.Purpose)
	}
	for _, m := range compaction.Messages {
		if m.Context != "" || strings.Contains(m.Content, "sum it up") {
			t.Fatalf("compaction request carries the turn's message or context: %+v", m)
		}
	}
	// Only the answer streamed: the summary is not in the answer deltas.
	for _, e := range env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindAnswerDelta) {
		if strings.Contains(string(e.Payload), "- note 0") {
			t.Fatalf("the summary streamed as answer text: %s", e.Payload)
		}
	}
}

// Permissions are read at each tool call, not at the turn's start: a grant
// revoked between two calls of one turn makes the second fail as
// FORBIDDEN inside the turn, and the model is told so.
func TestGrantRevokedBetweenToolCalls(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.RetrievalName}, nil)
	secondStep, release := make(chan struct{}, 1), make(chan struct{})
	model := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		switch n {
		case 1, 2:
			if n == 2 {
				secondStep <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
				{ID: fmt.Sprintf("call_%d", n), Name: tools.RetrievalName, Arguments: `{"query":"launch"}`}}}, nil
		}
		return nil, nil
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "what is the launch plan?")
	<-secondStep
	if _, err := env.DB.Exec(`DELETE FROM member_permissions WHERE member_id = $1 AND permission = 'documents.read'`, env.Alice.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if done := env.WaitTerminal(t, tt.ID); done.State != "completed" {
		t.Fatalf("turn ended %s: a refused tool is told to the model, not a failed turn", done.State)
	}
	var statuses []string
	for _, e := range env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindToolCompleted) {
		var p journal.ToolCompletedPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, p.Status)
	}
	if len(statuses) != 2 || statuses[0] != callback.ToolOK || statuses[1] != callback.ToolForbidden {
		t.Fatalf("tool statuses %v, want [ok forbidden]", statuses)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if m := last[len(last)-1]; m.Role != "tool" || !strings.Contains(m.Content, "FORBIDDEN") {
		t.Fatalf("the model was told %+v, want the FORBIDDEN result", m)
	}
}
