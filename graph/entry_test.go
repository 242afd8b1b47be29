package graph

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/room"
)

// TestEntryBodyForEveryKind: every journal kind's entry carries a body
// of its own type — the two tool kinds, the two steer kinds and the two
// membership kinds apart — filled from the same payload as the
// deprecated field of its kind, which keeps its value; a payload that
// does not decode still gives the kind's type, with the deprecated field
// null as before.
func TestEntryBodyForEveryKind(t *testing.T) {
	room0, turn0, who := uuid.New(), uuid.New(), uuid.New()
	at := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		kind    journal.Kind
		payload any
		body    string // the body's type: its GraphQL __typename
		check   func(b model.JournalPayload) bool
		old     func(e *model.JournalEntry) bool // the deprecated field is set
	}{
		{journal.KindTurnAccepted, journal.AcceptedPayload{Text: "hi", AuthorID: who, AuthorName: "Alice"}, "TurnAccepted",
			func(b model.JournalPayload) bool { return b.(*model.TurnAccepted).AuthorName == "Alice" },
			func(e *model.JournalEntry) bool { return e.Accepted != nil }},
		{journal.KindTurnStarted, journal.RecoveredPayload{StartedPayload: journal.StartedPayload{Attempt: 2, AgentVersion: 3}, Recovered: true}, "TurnStart",
			func(b model.JournalPayload) bool { s := b.(*model.TurnStart); return s.Attempt == 2 && s.Recovered },
			func(e *model.JournalEntry) bool { return e.Started != nil }},
		{journal.KindAnswerDelta, journal.DeltaPayload{Text: "Hel", Offset: 4}, "AnswerDelta",
			func(b model.JournalPayload) bool {
				d := b.(*model.AnswerDelta)
				return d.Text == "Hel" && d.Offset == 4
			},
			func(e *model.JournalEntry) bool { return e.Delta != nil }},
		{journal.KindToolRequested, journal.ToolRequestedPayload{CallID: "c1", Name: "search", Arguments: `{"q":"x"}`}, "ToolRequested",
			func(b model.JournalPayload) bool {
				r := b.(*model.ToolRequested)
				return r.Name == "search" && string(r.Arguments) == `{"q":"x"}`
			},
			func(e *model.JournalEntry) bool { return e.Tool != nil && e.Tool.Status == nil }},
		{journal.KindToolCompleted, journal.ToolCompletedPayload{CallID: "c1", Name: "search", Status: "ok", Bytes: 12}, "ToolCompleted",
			func(b model.JournalPayload) bool {
				c := b.(*model.ToolCompleted)
				return c.Status == "ok" && c.Bytes == 12 && c.CitationRefs != nil
			},
			func(e *model.JournalEntry) bool { return e.Tool != nil && e.Tool.Status != nil }},
		{journal.KindApprovalRequested, journal.ApprovalRequestedPayload{ApprovalID: who, Tool: "deploy", Arguments: `{}`, ExpiresAt: at}, "ApprovalRequest",
			func(b model.JournalPayload) bool { return b.(*model.ApprovalRequest).Tool == "deploy" },
			func(e *model.JournalEntry) bool { return e.ApprovalRequest != nil }},
		{journal.KindApprovalDecided, journal.ApprovalDecidedPayload{ApprovalID: who, Decision: "approved", DecidedBy: who}, "ApprovalDecisionRecord",
			func(b model.JournalPayload) bool {
				return b.(*model.ApprovalDecisionRecord).State == model.ApprovalStateApproved
			},
			func(e *model.JournalEntry) bool { return e.ApprovalDecision != nil }},
		{journal.KindSteerDelivered, journal.SteerDeliveredPayload{CommandID: who, ActorID: who, Text: "shorter"}, "SteerDelivered",
			func(b model.JournalPayload) bool { return b.(*model.SteerDelivered).Text == "shorter" },
			func(e *model.JournalEntry) bool {
				return e.Steer != nil && e.Steer.State == model.CommandStateDelivered
			}},
		{journal.KindSteerRejected, journal.SteerRejectedPayload{CommandID: who, ActorID: who, Text: "shorter", Reason: journal.SteerRejectedTurnEnded,
			Outcome: "cancelled", TerminalReason: outcome.ReasonCancelled}, "SteerRejected",
			func(b model.JournalPayload) bool {
				r := b.(*model.SteerRejected)
				return r.Text == "shorter" && r.Terminal.Outcome == model.TurnStateCancelled && r.Terminal.Reason == model.TerminalReasonCancelledByMember
			},
			func(e *model.JournalEntry) bool { return e.Steer != nil && e.Steer.State == model.CommandStateRejected }},
		{journal.KindCheckpoint, journal.CheckpointPayload{Steps: 3, ToolCalls: 2, Messages: 9}, "CheckpointRecord",
			func(b model.JournalPayload) bool { return b.(*model.CheckpointRecord).Messages == 9 },
			func(e *model.JournalEntry) bool { return e.Checkpoint != nil }},
		{journal.KindCompaction, journal.CompactionPayload{Summarised: 5, TokensBefore: 900, TokensAfter: 200, Through: 7, Turns: 2}, "CompactionRecord",
			func(b model.JournalPayload) bool {
				c := b.(*model.CompactionRecord)
				return c.Through != nil && *c.Through == 7
			},
			func(e *model.JournalEntry) bool { return e.Compaction != nil }},
		{journal.KindTurnAnswer, journal.AnswerPayload{Text: "Soon [doc:x#p0]", Citations: []journal.AnswerCitation{{ID: "doc:x#p0", Source: "Plan"}}}, "TurnAnswer",
			func(b model.JournalPayload) bool {
				a := b.(*model.TurnAnswer)
				return a.Text != "" && len(a.Citations) == 1 && a.Citations[0].ID == turn0.String()+"/doc:x#p0" && a.Artifacts != nil
			},
			func(e *model.JournalEntry) bool { return e.Answer != nil }},
		{journal.KindTurnTerminal, journal.TerminalPayload{Outcome: "failed", Reason: outcome.ReasonModelRateLimited}, "TurnTerminal",
			func(b model.JournalPayload) bool {
				tt := b.(*model.TurnTerminal)
				return tt.Outcome == model.TurnStateFailed && tt.Reason == model.TerminalReasonModelRateLimited
			},
			func(e *model.JournalEntry) bool { return e.Terminal != nil }},
		{journal.KindMemberJoined, room.MemberPayload{MemberID: who, AudienceVersion: 2}, "MemberJoined",
			func(b model.JournalPayload) bool { return b.(*model.MemberJoined).AudienceVersion == 2 },
			func(e *model.JournalEntry) bool { return e.Membership != nil }},
		{journal.KindMemberLeft, room.MemberPayload{MemberID: who, AudienceVersion: 3}, "MemberLeft",
			func(b model.JournalPayload) bool { return b.(*model.MemberLeft).MemberID == who.String() },
			func(e *model.JournalEntry) bool { return e.Membership != nil }},
	}
	covered := map[model.JournalKind]bool{}
	bodies := map[string]bool{}
	for i, tt := range tests {
		raw, err := json.Marshal(tt.payload)
		if err != nil {
			t.Fatal(err)
		}
		e := journal.Entry{ConversationID: room0, Seq: int64(i + 1), Kind: tt.kind, TurnID: uuid.NullUUID{UUID: turn0, Valid: true}, Attempt: 1, Payload: raw, CreatedAt: at}
		out := toEntry(e)
		covered[out.Kind] = true
		if got := strings.TrimPrefix(fmt.Sprintf("%T", out.Body), "*model."); got != tt.body {
			t.Errorf("%s: body is %s, want %s", tt.kind, got, tt.body)
			continue
		}
		if bodies[tt.body] {
			t.Errorf("%s: body type %s is another kind's too", tt.kind, tt.body)
		}
		bodies[tt.body] = true
		if !tt.check(out.Body) {
			t.Errorf("%s: body %+v does not carry the payload", tt.kind, out.Body)
		}
		if !tt.old(out) {
			t.Errorf("%s: the deprecated field of the kind is not set", tt.kind)
		}

		// A payload that does not decode: still the kind's type, never a
		// null body; the deprecated field null, as it always was.
		e.Payload = json.RawMessage(`"not an object"`)
		broken := toEntry(e)
		if got := strings.TrimPrefix(fmt.Sprintf("%T", broken.Body), "*model."); got != tt.body {
			t.Errorf("%s, undecodable: body is %s, want %s", tt.kind, got, tt.body)
		}
		if tt.kind != journal.KindAnswerDelta && tt.old(broken) {
			t.Errorf("%s, undecodable: the deprecated field is set", tt.kind)
		}
	}
	for _, k := range model.AllJournalKind {
		if !covered[k] {
			t.Errorf("kind %s has no row", k)
		}
	}
}
