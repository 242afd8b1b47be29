package callback_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/runtime"
)

func completed(t *testing.T, env *testkit.Env, text string) *ent.Turn {
	t.Helper()
	tt := env.Submit(t, env.Alice, env.Shared.ID, text)
	done := env.WaitTerminal(t, tt.ID)
	if done.State != "completed" {
		t.Fatalf("turn %q ended %s (%v)", text, done.State, done.TerminalReason)
	}
	return done
}

// A room's compaction is kept for the room with the position it covers:
// the next turn starts from it (a reused compaction entry) instead of the
// turns it covers, and the next compaction extends it with the turns
// after that position only — never the room from its start.
func TestRoomSummaryIsStoredReusedAndExtended(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	for i := range 3 {
		completed(t, env, fmt.Sprintf("note %d: %s", i, strings.Repeat("lorem ipsum ", 30)))
	}
	env.Agent(t, "react", nil, map[string]int64{"context_tokens": 200})
	first := completed(t, env, "sum it up")
	s1, ok := env.RoomSummary(t, env.Shared.ID)
	if !ok {
		t.Fatal("the compaction was not kept for the room")
	}
	third := earlierPositions(t, env, first.Position)
	if s1.Through != third || s1.Turns != 3 || !strings.HasPrefix(s1.Text, runtime.SummaryPrefix) || !strings.Contains(s1.Text, "note 0") {
		t.Fatalf("room summary = %+v, want through %d (the third note), 3 turns", s1, third)
	}
	if cs := env.CompactionsOf(t, env.Shared.ID, first.ID); len(cs) != 1 || cs[0].Through != s1.Through || cs[0].Turns != 3 || cs[0].Reused {
		t.Fatalf("compaction entries of the first turn = %+v", cs)
	}

	// The next turn reads the summary and the one turn after it: under
	// a budget that fits them, it summarises nothing.
	env.Agent(t, "react", nil, map[string]int64{"context_tokens": 1000})
	before := len(model.Requests())
	second := completed(t, env, "and now?")
	reqs := model.Requests()[before:]
	if len(reqs) != 1 || reqs[0].Purpose != runtime.PurposeStep {
		t.Fatalf("second turn made %d model calls (%v), want one step", len(reqs), purposes(reqs))
	}
	var sawSummary bool
	for _, m := range reqs[0].Messages {
		if strings.Contains(m.Content, "note 1: lorem") && !strings.HasPrefix(m.Content, runtime.SummaryPrefix) {
			t.Fatalf("the step carries a summarised turn verbatim: %.80q", m.Content)
		}
		sawSummary = sawSummary || m.Content == s1.Text
	}
	if !sawSummary {
		t.Fatal("the step does not carry the room's summary")
	}
	if cs := env.CompactionsOf(t, env.Shared.ID, second.ID); len(cs) != 1 || !cs[0].Reused || cs[0].Through != s1.Through || cs[0].Turns != 3 {
		t.Fatalf("compaction entries of the second turn = %+v, want one reused entry", cs)
	}

	// New turns over a tighter budget again: the compaction summarises
	// the summary and the turns after it, nothing older.
	env.Agent(t, "react", nil, map[string]int64{"context_tokens": 200})
	for i := range 2 {
		completed(t, env, fmt.Sprintf("later %d: %s", i, strings.Repeat("dolor sit ", 30)))
	}
	s2, _ := env.RoomSummary(t, env.Shared.ID)
	if s2.Through <= s1.Through || s2.Turns <= s1.Turns {
		t.Fatalf("the summary did not move forward: %+v after %+v", s2, s1)
	}
	for _, r := range model.Requests()[before:] {
		if r.Purpose != runtime.PurposeCompaction {
			continue
		}
		transcript := r.Messages[len(r.Messages)-1].Content
		// A turn's own message opens a paragraph of the transcript; in the
		// summary it is a quoted line.
		verbatim := strings.HasPrefix(transcript, "user: note 0") || strings.Contains(transcript, "\n\nuser: note ")
		if verbatim || !strings.Contains(transcript, runtime.SummaryPrefix) {
			t.Fatalf("a later compaction re-read the room from its start: %.200q", transcript)
		}
	}
}

// A compaction that covers a turn's own tool results stays the turn's:
// the room keeps only a summary of its history. (A member's private
// document read by one turn never reaches another member's turn through
// the room's summary.)
func TestTurnToolResultsNeverBecomeTheRoomSummary(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	secret := "the vault code is 4417"
	model := &testkit.ScriptModel{Script: func(_ context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if req.Purpose == runtime.PurposeCompaction {
			return &gateway.Result{Text: "summary: " + req.Messages[len(req.Messages)-1].Content, FinishReason: "stop"}, nil
		}
		var rounds int
		for _, m := range req.Messages {
			if m.Role == "tool" {
				rounds++
			}
		}
		if len(req.Tools) > 0 && rounds < 3 {
			return &gateway.Result{ToolCalls: []gateway.ToolCall{{ID: fmt.Sprintf("c%d", n), Name: "history_search",
				Arguments: fmt.Sprintf(`{"query":"%s %d"}`, secret, n)}}, FinishReason: "tool_calls"}, nil
		}
		return nil, nil
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	completed(t, env, "an earlier question "+strings.Repeat("lorem ", 40))
	env.Agent(t, "react", []string{"history_search"}, map[string]int64{"context_tokens": 120})
	tt := completed(t, env, "look it up")
	cs := env.CompactionsOf(t, env.Shared.ID, tt.ID)
	if len(cs) < 2 {
		t.Fatalf("compactions = %+v, want the history's and then the turn's own", cs)
	}
	s, ok := env.RoomSummary(t, env.Shared.ID)
	if !ok || s.Through != cs[0].Through || s.Through == 0 {
		t.Fatalf("room summary %+v (%v), want the history's compaction %+v", s, ok, cs[0])
	}
	if strings.Contains(s.Text, "vault") {
		t.Fatalf("the room summary carries the turn's tool results: %q", s.Text)
	}
	for _, c := range cs[1:] {
		if c.Through != 0 {
			t.Fatalf("the turn's own compaction was made the room's: %+v", c)
		}
	}
}

func earlierPositions(t *testing.T, env *testkit.Env, before int64) int64 {
	t.Helper()
	var p int64
	if err := env.DB.QueryRow(`SELECT max(position) FROM turns WHERE conversation_id = $1 AND position < $2 AND state = 'completed'`,
		env.Shared.ID, before).Scan(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func purposes(reqs []gateway.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Purpose)
	}
	return out
}

// When the next turn would start with more than half the context budget
// of history, the run summarises it after its answer has streamed and
// before it completes: the next turn starts from the summary, with no
// compaction before its first token.
func TestHistoryIsCompactedAheadAfterTheAnswer(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	completed(t, env, "note: "+strings.Repeat("lorem ipsum ", 20))
	env.Agent(t, "react", nil, map[string]int64{"context_tokens": 300})
	tt := completed(t, env, "what now?")
	var kinds []journal.Kind
	for _, e := range env.Entries(t, env.Shared.ID) {
		if e.TurnID.UUID == tt.ID {
			kinds = append(kinds, e.Kind)
		}
	}
	iDelta, iComp, iAnswer := slicesIndex(kinds, journal.KindAnswerDelta), slicesIndex(kinds, journal.KindCompaction), slicesIndex(kinds, journal.KindTurnAnswer)
	if iDelta < 0 || iComp < iDelta || iAnswer < iComp {
		t.Fatalf("entries of the turn %v: want the answer streamed, then the compaction, then the answer committed", kinds)
	}
	if _, ok := env.RoomSummary(t, env.Shared.ID); !ok {
		t.Fatal("the compaction ahead was not kept for the room")
	}
	before := len(model.Requests())
	completed(t, env, "and then?")
	if got := purposes(model.Requests()[before:]); len(got) == 0 || got[0] != runtime.PurposeStep {
		t.Fatalf("the next turn's model calls = %v, want the step first", got)
	}
}

func slicesIndex(kinds []journal.Kind, k journal.Kind) int {
	for i, x := range kinds {
		if x == k {
			return i
		}
	}
	return -1
}
