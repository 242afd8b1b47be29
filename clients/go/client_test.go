package client

import (
	"slices"
	"testing"
	"time"
)

// The pure parts; the client against a real server is tested in
// ../server (TestGoClient*), with the conformance list.

func TestBackoffIsBoundedFullJitter(t *testing.T) {
	p := RetryPolicy{}.withDefaults()
	for attempt := range 40 {
		bound := min(p.Max, p.Base<<min(attempt, 20))
		for range 50 {
			if d := p.backoff(attempt, 0); d < 0 || d > bound {
				t.Fatalf("attempt %d waited %s, bound %s", attempt, d, bound)
			}
		}
	}
	if d := p.backoff(0, 3*time.Second); d < 3*time.Second {
		t.Fatalf("the server's retry-after is a floor: waited %s", d)
	}
}

func TestRetryableCodes(t *testing.T) {
	for c, want := range map[Code]bool{Network: true, RateLimited: true, Unavailable: true, Unauthenticated: false,
		Forbidden: false, NotFound: false, BadUserInput: false, Conflict: false, Internal: false} {
		if c.Retryable() != want {
			t.Errorf("%s retryable %v, want %v", c, c.Retryable(), want)
		}
	}
}

func TestFoldPlacesDeltasAndCountsTheLane(t *testing.T) {
	id := func(s string) *string { return &s }
	accepted := func(seq int, turn string) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindTurnAccepted, TurnId: id(turn), Text: id(turn)}
	}
	delta := func(seq, attempt, offset int, text string) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindAnswerDelta, TurnId: id("a"), Attempt: attempt,
			Delta: &EntryFieldsDeltaAnswerDelta{Seq: seq, Attempt: attempt, Offset: offset, Text: text}}
	}
	f := NewFold(0)
	f.Apply(accepted(1, "a"))
	f.Apply(accepted(2, "b"))
	if f.Turn("a").QueuePosition != 0 || f.Turn("b").QueuePosition != 1 {
		t.Fatalf("queue positions %d %d", f.Turn("a").QueuePosition, f.Turn("b").QueuePosition)
	}
	f.Apply(&EntryFields{Seq: 3, Kind: JournalKindTurnStarted, TurnId: id("a"), Attempt: 1, Started: &EntryFieldsStartedTurnStart{Attempt: 1}})
	f.Apply(delta(4, 1, 0, "Hello, "))
	if f.Apply(delta(4, 1, 0, "Hello, ")) {
		t.Fatal("an entry seen before was applied again")
	}
	f.Apply(delta(5, 1, 7, "world"))
	if got := f.Turn("a").Answer; got != "Hello, world" {
		t.Fatalf("answer %q", got)
	}
	f.Apply(delta(6, 2, 0, "Hi"))
	if got := f.Turn("a").Answer; got != "Hi" {
		t.Fatalf("a new attempt's answer %q", got)
	}
	f.Apply(&EntryFields{Seq: 7, Kind: JournalKindTurnTerminal, TurnId: id("a"), Terminal: &EntryFieldsTerminalTurnTerminal{Outcome: TurnStateCompleted, Reason: TerminalReasonCompleted}})
	if f.Turn("a").QueuePosition != -1 || f.Turn("b").QueuePosition != 0 || !f.Turn("a").Ended() {
		t.Fatalf("after a ended: %d %d", f.Turn("a").QueuePosition, f.Turn("b").QueuePosition)
	}
}

// TestFoldShowsAWithheldTurnAsTheNotice: a turn withheld from the viewer
// (AUDIENCE_WITHHELD) folds to the server's notice alone, whether its
// deltas were replayed empty or streamed with text before it was
// withheld, and to no text at all when no answer was published.
func TestFoldShowsAWithheldTurnAsTheNotice(t *testing.T) {
	t.Parallel()
	const notice = "withheld here"
	id := func(s string) *string { return &s }
	delta := func(seq, offset int, text string) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindAnswerDelta, TurnId: id("a"), Attempt: 1,
			Delta: &EntryFieldsDeltaAnswerDelta{Seq: seq, Attempt: 1, Offset: offset, Text: text}}
	}
	answer := &EntryFields{Kind: JournalKindTurnAnswer, TurnId: id("a"), Answer: &EntryFieldsAnswerTurnAnswer{Text: notice}}
	terminal := &EntryFields{Kind: JournalKindTurnTerminal, TurnId: id("a"),
		Terminal: &EntryFieldsTerminalTurnTerminal{Outcome: TurnStateCompleted, Reason: TerminalReasonAudienceWithheld}}
	for _, tt := range []struct {
		name    string
		entries []*EntryFields
		want    string
	}{
		{"replayed: empty deltas, then the notice", []*EntryFields{delta(3, 0, ""), delta(4, 7, ""), answer, terminal}, notice},
		{"live: text streamed before it was withheld", []*EntryFields{delta(3, 0, "Hello, "), delta(4, 7, "world"), answer, terminal}, notice},
		{"no answer published", []*EntryFields{delta(3, 0, "Hello, "), terminal}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFold(0)
			f.Apply(&EntryFields{Seq: 1, Kind: JournalKindTurnAccepted, TurnId: id("a"), Text: id("q")})
			f.Apply(&EntryFields{Seq: 2, Kind: JournalKindTurnStarted, TurnId: id("a"), Attempt: 1, Started: &EntryFieldsStartedTurnStart{Attempt: 1}})
			for i, e := range tt.entries {
				e := *e
				if e.Seq == 0 {
					e.Seq = 10 + i
				}
				f.Apply(&e)
			}
			v := f.Turn("a")
			if v.Answer != tt.want || !v.Withheld || v.State != TurnStateCompleted {
				t.Fatalf("folded to %q (withheld %v, %s); want %q, withheld", v.Answer, v.Withheld, v.State, tt.want)
			}
		})
	}
}

// TestFoldMarksAnInterruptedAttempt: after a crash the next attempt writes
// its answer again from offset 0; the fold shows that attempt's text alone
// and keeps the partial answer of the one before apart, as interrupted,
// however the new attempt's stream begins.
func TestFoldMarksAnInterruptedAttempt(t *testing.T) {
	t.Parallel()
	id := func(s string) *string { return &s }
	started := func(seq, attempt int) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindTurnStarted, TurnId: id("a"), Attempt: attempt,
			Started: &EntryFieldsStartedTurnStart{Attempt: attempt, Recovered: attempt > 1}}
	}
	delta := func(seq, attempt, offset int, text string) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindAnswerDelta, TurnId: id("a"), Attempt: attempt,
			Delta: &EntryFieldsDeltaAnswerDelta{Seq: seq, Attempt: attempt, Offset: offset, Text: text}}
	}
	const final = "Launch: Tuesday, decided by Ana."
	answer := &EntryFields{Seq: 20, Kind: JournalKindTurnAnswer, TurnId: id("a"), Attempt: 2, Answer: &EntryFieldsAnswerTurnAnswer{Text: final}}
	partial := []InterruptedAnswer{{Attempt: 1, Text: "The launch is on Mon"}}
	for _, tt := range []struct {
		name      string
		entries   []*EntryFields
		afterNext string // the answer once the first entry of the new attempt is in
	}{
		{"the new attempt starts", []*EntryFields{started(5, 2), delta(6, 2, 0, "Launch: Tuesday"), delta(7, 2, 15, ", decided by Ana."), answer}, ""},
		{"the new attempt's first delta", []*EntryFields{delta(6, 2, 0, "Launch: Tuesday"), delta(7, 2, 15, ", decided by Ana."), answer}, "Launch: Tuesday"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFold(0)
			f.Apply(&EntryFields{Seq: 1, Kind: JournalKindTurnAccepted, TurnId: id("a"), Text: id("When is the launch?")})
			f.Apply(started(2, 1))
			f.Apply(delta(3, 1, 0, "The launch is on "))
			f.Apply(delta(4, 1, 17, "Mon"))
			f.Apply(tt.entries[0])
			v := f.Turn("a")
			if v.Answer != tt.afterNext || !slices.Equal(v.Interrupted, partial) {
				t.Fatalf("at the boundary: answer %q, interrupted %v; want %q, %v", v.Answer, v.Interrupted, tt.afterNext, partial)
			}
			for _, e := range tt.entries[1:] {
				f.Apply(e)
			}
			if v.Answer != final || !v.Answered || v.Attempt != 2 || !slices.Equal(v.Interrupted, partial) {
				t.Fatalf("answer %q (answered %v, attempt %d), interrupted %v; want %q alone, %v", v.Answer, v.Answered, v.Attempt, v.Interrupted, final, partial)
			}
		})
	}
	t.Run("nothing streamed, nothing to mark", func(t *testing.T) {
		f := NewFold(0)
		f.Apply(&EntryFields{Seq: 1, Kind: JournalKindTurnAccepted, TurnId: id("a"), Text: id("q")})
		f.Apply(started(2, 1))
		f.Apply(started(3, 2))
		f.Apply(delta(4, 2, 0, "Hi"))
		if v := f.Turn("a"); v.Answer != "Hi" || len(v.Interrupted) != 0 {
			t.Fatalf("answer %q, interrupted %v", v.Answer, v.Interrupted)
		}
	})
	t.Run("withheld keeps no attempt's text", func(t *testing.T) {
		f := NewFold(0)
		f.Apply(&EntryFields{Seq: 1, Kind: JournalKindTurnAccepted, TurnId: id("a"), Text: id("q")})
		f.Apply(started(2, 1))
		f.Apply(delta(3, 1, 0, "Secret plan"))
		f.Apply(started(4, 2))
		f.Apply(&EntryFields{Seq: 5, Kind: JournalKindTurnTerminal, TurnId: id("a"),
			Terminal: &EntryFieldsTerminalTurnTerminal{Outcome: TurnStateCompleted, Reason: TerminalReasonAudienceWithheld}})
		if v := f.Turn("a"); v.Answer != "" || len(v.Interrupted) != 0 {
			t.Fatalf("answer %q, interrupted %v", v.Answer, v.Interrupted)
		}
	})
}

// TestFoldReplacesADiscardedDraft: only the run's last step is its
// answer. A steer delivered after a step, or a tool it requested, makes
// the next step write the answer anew, at offsets that continue the
// attempt's count; the fold shows the new draft in place of the old one,
// never after it.
func TestFoldReplacesADiscardedDraft(t *testing.T) {
	t.Parallel()
	id := func(s string) *string { return &s }
	delta := func(seq, offset int, text string) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindAnswerDelta, TurnId: id("a"), Attempt: 1,
			Delta: &EntryFieldsDeltaAnswerDelta{Seq: seq, Attempt: 1, Offset: offset, Text: text}}
	}
	steer := func(seq int) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindSteerDelivered, TurnId: id("a"), Attempt: 1,
			Steer: &EntryFieldsSteerSteerRecord{CommandId: "c1", Text: "shorter", State: CommandStateDelivered}}
	}
	tool := func(seq int, kind JournalKind) *EntryFields {
		return &EntryFields{Seq: seq, Kind: kind, TurnId: id("a"), Attempt: 1, Tool: &EntryFieldsToolToolActivity{CallId: "k1", Name: "retrieval"}}
	}
	checkpoint := func(seq int) *EntryFields {
		return &EntryFields{Seq: seq, Kind: JournalKindCheckpoint, TurnId: id("a"), Attempt: 1}
	}
	for _, tt := range []struct {
		name    string
		entries []*EntryFields
		want    string
	}{
		{"a steer delivered after the last step", []*EntryFields{delta(3, 0, "A long answer. "), delta(4, 15, "!"), steer(5), checkpoint(6),
			delta(7, 16, "Short"), delta(8, 21, " one.")}, "Short one."},
		{"text before a tool request", []*EntryFields{delta(3, 0, "Let me look. "), tool(4, JournalKindToolRequested), tool(5, JournalKindToolCompleted),
			checkpoint(6), delta(7, 13, "Found it.")}, "Found it."},
		{"two steers, one draft each", []*EntryFields{delta(3, 0, "One. "), steer(4), delta(5, 5, "Two. "), steer(6), delta(7, 10, "Three.")}, "Three."},
		{"a steer before any text", []*EntryFields{steer(3), delta(4, 0, "Only.")}, "Only."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFold(0)
			f.Apply(&EntryFields{Seq: 1, Kind: JournalKindTurnAccepted, TurnId: id("a"), Text: id("q")})
			f.Apply(&EntryFields{Seq: 2, Kind: JournalKindTurnStarted, TurnId: id("a"), Attempt: 1, Started: &EntryFieldsStartedTurnStart{Attempt: 1}})
			for _, e := range tt.entries {
				f.Apply(e)
			}
			v := f.Turn("a")
			if v.Answer != tt.want {
				t.Fatalf("streamed %q, want %q", v.Answer, tt.want)
			}
			f.Apply(&EntryFields{Seq: 30, Kind: JournalKindTurnAnswer, TurnId: id("a"), Attempt: 1, Answer: &EntryFieldsAnswerTurnAnswer{Text: tt.want}})
			if v.Answer != tt.want || len(v.Interrupted) != 0 {
				t.Fatalf("published %q, interrupted %v", v.Answer, v.Interrupted)
			}
		})
	}
}
