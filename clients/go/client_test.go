package client

import (
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
