package graph

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/room"
)

// entryID is the stable id of a journal entry and of the answer delta it
// carries: <conversation id>:<seq>.
func entryID(e journal.Entry) string {
	return fmt.Sprintf("%s:%d", e.ConversationID, e.Seq)
}

// terminalReasons maps the reasons lease and runner record (outcome) to the
// contract's enum; a reason not listed (a row written by an older build)
// is RUNTIME_FAILED.
var terminalReasons = map[string]model.TerminalReason{
	outcome.ReasonCompleted:         model.TerminalReasonCompleted,
	outcome.ReasonCancelled:         model.TerminalReasonCancelledByMember,
	outcome.ReasonMembershipRevoked: model.TerminalReasonMembershipRevoked,
	outcome.ReasonAudienceWithheld:  model.TerminalReasonAudienceWithheld,
	outcome.ReasonBudgetExhausted:   model.TerminalReasonBudgetExhausted,
	outcome.ReasonRecoveryExhausted: model.TerminalReasonRecoveryExhausted,
	outcome.ReasonInputLeaseLost:    model.TerminalReasonInputLeaseLost,
	outcome.ReasonModelRateLimited:  model.TerminalReasonModelRateLimited,
	outcome.ReasonModelUnavailable:  model.TerminalReasonModelUnavailable,
	outcome.ReasonModelAuthFailed:   model.TerminalReasonModelAuthFailed,
	outcome.ReasonModelStreamCut:    model.TerminalReasonModelStreamCut,
	outcome.ReasonModelStreamIdle:   model.TerminalReasonModelStreamIdle,
	outcome.ReasonModelRouteInvalid: model.TerminalReasonModelRouteInvalid,
	outcome.ReasonRuntimeFailed:     model.TerminalReasonRuntimeFailed,
}

// toTerminal is how a turn ended, from its outcome and recorded reason.
func toTerminal(outcome, reason string) *model.TurnTerminal {
	r, ok := terminalReasons[reason]
	if !ok {
		r = model.TerminalReasonRuntimeFailed
	}
	return &model.TurnTerminal{Outcome: model.TurnState(strings.ToUpper(outcome)), Reason: r}
}

// rawJSON is s as a JSON value when it is one (tool arguments are stored
// as the model wrote them, redacted), else s as a JSON string.
func rawJSON(s string) model.JSON {
	if json.Valid([]byte(s)) {
		return model.JSON(s)
	}
	b, _ := json.Marshal(s)
	return model.JSON(b)
}

// typed fills out's body, and the deprecated field named for e's kind,
// from its payload (the payload as the viewer may read it: the feed has
// projected it, keeping its shape). The body is never null: a payload
// that does not decode — only a bug writes one — gives the kind's type
// with what did decode, so __typename still tells the kind and the raw
// payload still carries the bytes; the deprecated field stays null then,
// as it always has.
func typed(out *model.JournalEntry, e journal.Entry) {
	turnID := ""
	if e.TurnID.Valid {
		turnID = e.TurnID.UUID.String()
	}
	decode := func(p any) bool { return json.Unmarshal(e.Payload, p) == nil }
	switch e.Kind {
	case journal.KindTurnAccepted:
		var p journal.AcceptedPayload
		ok := decode(&p)
		body := &model.TurnAccepted{AuthorID: p.AuthorID.String(), AuthorName: p.AuthorName}
		out.Body = body
		if ok {
			out.Accepted = body
		}
	case journal.KindTurnStarted:
		var p journal.RecoveredPayload
		ok := decode(&p)
		body := &model.TurnStart{Attempt: int64(p.Attempt), AgentVersion: int64(p.AgentVersion), Recovered: p.Recovered}
		out.Body = body
		if ok {
			out.Started = body
		}
	case journal.KindAnswerDelta:
		out.Delta = toDelta(e)
		out.Body = out.Delta
	case journal.KindToolRequested:
		var p journal.ToolRequestedPayload
		ok := decode(&p)
		out.Body = &model.ToolRequested{CallID: p.CallID, Name: p.Name, Arguments: rawJSON(p.Arguments)}
		if ok {
			out.Tool = &model.ToolActivity{CallID: p.CallID, Name: p.Name, Arguments: rawJSON(p.Arguments)}
		}
	case journal.KindToolCompleted:
		var p journal.ToolCompletedPayload
		ok := decode(&p)
		bytes := int64(p.Bytes)
		out.Body = &model.ToolCompleted{CallID: p.CallID, Name: p.Name, Status: p.Status, Bytes: bytes, CitationRefs: nonNil(p.Citations)}
		if ok {
			out.Tool = &model.ToolActivity{CallID: p.CallID, Name: p.Name, Status: &p.Status, Bytes: &bytes, Citations: nonNil(p.Citations)}
		}
	case journal.KindApprovalRequested:
		var p journal.ApprovalRequestedPayload
		ok := decode(&p)
		body := &model.ApprovalRequest{ApprovalID: p.ApprovalID.String(), Tool: p.Tool, Arguments: rawJSON(p.Arguments), ExpiresAt: p.ExpiresAt}
		out.Body = body
		if ok {
			out.ApprovalRequest = body
		}
	case journal.KindApprovalDecided:
		var p journal.ApprovalDecidedPayload
		ok := decode(&p)
		body := &model.ApprovalDecisionRecord{ApprovalID: p.ApprovalID.String(), State: model.ApprovalState(strings.ToUpper(p.Decision))}
		if p.DecidedBy != uuid.Nil {
			s := p.DecidedBy.String()
			body.DecidedBy = &s
		}
		out.Body = body
		if ok {
			out.ApprovalDecision = body
		}
	case journal.KindSteerDelivered:
		var p journal.SteerDeliveredPayload
		ok := decode(&p)
		out.Body = &model.SteerDelivered{CommandID: p.CommandID.String(), ActorID: p.ActorID.String(), Text: p.Text}
		if ok {
			out.Steer = &model.SteerRecord{CommandID: p.CommandID.String(), ActorID: p.ActorID.String(), Text: p.Text, State: model.CommandStateDelivered}
		}
	case journal.KindSteerRejected:
		var p journal.SteerRejectedPayload
		ok := decode(&p)
		out.Body = &model.SteerRejected{CommandID: p.CommandID.String(), ActorID: p.ActorID.String(), Text: p.Text,
			Terminal: toTerminal(p.Outcome, p.TerminalReason)}
		if ok {
			out.Steer = &model.SteerRecord{CommandID: p.CommandID.String(), ActorID: p.ActorID.String(), Text: p.Text, State: model.CommandStateRejected}
		}
	case journal.KindCheckpoint:
		var p journal.CheckpointPayload
		ok := decode(&p)
		body := &model.CheckpointRecord{Steps: int64(p.Steps), ToolCalls: int64(p.ToolCalls), Messages: int64(p.Messages)}
		out.Body = body
		if ok {
			out.Checkpoint = body
		}
	case journal.KindCompaction:
		var p journal.CompactionPayload
		ok := decode(&p)
		body := &model.CompactionRecord{Summarised: int64(p.Summarised), TokensBefore: int64(p.TokensBefore), TokensAfter: int64(p.TokensAfter), Reused: p.Reused}
		if p.Through > 0 {
			body.Through, body.Turns = &p.Through, &p.Turns
		}
		out.Body = body
		if ok {
			out.Compaction = body
		}
	case journal.KindTurnAnswer:
		var p journal.AnswerPayload
		ok := decode(&p)
		body := &model.TurnAnswer{Text: p.Text, Citations: toCitations(turnID, p.Citations), Artifacts: toAnswerArtifacts(turnID, p.Artifacts)}
		out.Body = body
		if ok {
			out.Answer = body
		}
	case journal.KindTurnTerminal:
		var p journal.TerminalPayload
		ok := decode(&p)
		body := toTerminal(p.Outcome, p.Reason)
		out.Body = body
		if ok {
			out.Terminal = body
		}
	case journal.KindMemberJoined:
		var p room.MemberPayload
		ok := decode(&p)
		out.Body = &model.MemberJoined{MemberID: p.MemberID.String(), AudienceVersion: p.AudienceVersion}
		if ok {
			out.Membership = &model.MembershipChange{MemberID: p.MemberID.String(), AudienceVersion: p.AudienceVersion}
		}
	case journal.KindMemberLeft:
		var p room.MemberPayload
		ok := decode(&p)
		out.Body = &model.MemberLeft{MemberID: p.MemberID.String(), AudienceVersion: p.AudienceVersion}
		if ok {
			out.Membership = &model.MembershipChange{MemberID: p.MemberID.String(), AudienceVersion: p.AudienceVersion}
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
