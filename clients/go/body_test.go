package client

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestEntryBodyDecodesByTypename: an entry's body arrives as the
// JournalPayloadFields member its __typename names — one Go type per
// journal kind — so a type switch, not a nil check per field, tells the
// kinds apart; a body of a type this client does not know is an error,
// not a silent zero value. (The e2e tier reads the bodies of a real
// room's journal: TestGoClientJournalBodies.)
func TestEntryBodyDecodesByTypename(t *testing.T) {
	tests := []struct {
		body string
		want string // what describeBody reads of it
	}{
		{`{"__typename":"TurnAccepted","authorId":"m1","authorName":"Alice"}`, "accepted Alice"},
		{`{"__typename":"TurnStart","attempt":2,"agentVersion":1,"recovered":true}`, "started 2 true"},
		{`{"__typename":"AnswerDelta","id":"r:3","turnId":"t","seq":3,"attempt":1,"offset":7,"text":"world"}`, "delta 7 world"},
		{`{"__typename":"ToolRequested","callId":"c1","name":"search","arguments":{"q":"launch"}}`, `requested search {"q":"launch"}`},
		{`{"__typename":"ToolCompleted","callId":"c1","name":"search","status":"ok","bytes":12,"citationRefs":["doc:1#p0"]}`, "completed ok [doc:1#p0]"},
		{`{"__typename":"ApprovalRequest","approvalId":"a1","tool":"deploy","arguments":{},"expiresAt":"2026-12-04T09:30:00Z"}`, "approval deploy"},
		{`{"__typename":"ApprovalDecisionRecord","approvalId":"a1","state":"APPROVED","decidedBy":"m1"}`, "decided APPROVED"},
		{`{"__typename":"SteerDelivered","commandId":"c","actorId":"m1","text":"shorter"}`, "steered shorter"},
		{`{"__typename":"SteerRejected","commandId":"c","actorId":"m1","text":"shorter","terminal":{"outcome":"CANCELLED","reason":"CANCELLED_BY_MEMBER"}}`, "rejected CANCELLED_BY_MEMBER"},
		{`{"__typename":"CheckpointRecord","steps":3,"toolCalls":2,"messages":9}`, "checkpoint 3"},
		{`{"__typename":"CompactionRecord","summarised":5,"tokensBefore":900,"tokensAfter":200,"through":null,"turns":null,"reused":false}`, "compaction 5"},
		{`{"__typename":"TurnAnswer","text":"Soon","citations":[],"artifacts":[]}`, "answer Soon"},
		{`{"__typename":"TurnTerminal","outcome":"FAILED","reason":"MODEL_RATE_LIMITED"}`, "terminal MODEL_RATE_LIMITED"},
		{`{"__typename":"MemberJoined","memberId":"m2","audienceVersion":2}`, "joined m2"},
		{`{"__typename":"MemberLeft","memberId":"m2","audienceVersion":3}`, "left m2"},
	}
	for _, tt := range tests {
		var e EntryFields
		if err := json.Unmarshal([]byte(`{"seq":1,"kind":"CHECKPOINT","body":`+tt.body+`}`), &e); err != nil {
			t.Fatalf("decode %s: %v", tt.body, err)
		}
		if got := describeBody(e.Body); got != tt.want {
			t.Errorf("body %s reads %q, want %q", tt.body, got, tt.want)
		}
	}
	var e EntryFields
	if err := json.Unmarshal([]byte(`{"seq":1,"kind":"CHECKPOINT","body":{"__typename":"SomethingNew"}}`), &e); err == nil {
		t.Fatalf("a body of an unknown type decoded as %T", e.Body)
	}
}

// describeBody reads each member's own fields through a type switch.
func describeBody(b JournalPayloadFields) string {
	switch b := b.(type) {
	case *JournalPayloadFieldsTurnAccepted:
		return "accepted " + b.AuthorName
	case *JournalPayloadFieldsTurnStart:
		return fmt.Sprintf("started %d %v", b.Attempt, b.Recovered)
	case *JournalPayloadFieldsAnswerDelta:
		return fmt.Sprintf("delta %d %s", b.Offset, b.Text)
	case *JournalPayloadFieldsToolRequested:
		return "requested " + b.Name + " " + string(b.Arguments)
	case *JournalPayloadFieldsToolCompleted:
		return fmt.Sprintf("completed %s %v", b.Status, b.CitationRefs)
	case *JournalPayloadFieldsApprovalRequest:
		return "approval " + b.Tool
	case *JournalPayloadFieldsApprovalDecisionRecord:
		return "decided " + string(b.State)
	case *JournalPayloadFieldsSteerDelivered:
		return "steered " + b.Text
	case *JournalPayloadFieldsSteerRejected:
		return "rejected " + string(b.Terminal.Reason)
	case *JournalPayloadFieldsCheckpointRecord:
		return fmt.Sprintf("checkpoint %d", b.Steps)
	case *JournalPayloadFieldsCompactionRecord:
		return fmt.Sprintf("compaction %d", b.Summarised)
	case *JournalPayloadFieldsTurnAnswer:
		return "answer " + b.Text
	case *JournalPayloadFieldsTurnTerminal:
		return "terminal " + string(b.Reason)
	case *JournalPayloadFieldsMemberJoined:
		return "joined " + b.MemberId
	case *JournalPayloadFieldsMemberLeft:
		return "left " + b.MemberId
	case nil:
		return "no body"
	default:
		return fmt.Sprintf("unknown %T", b)
	}
}
