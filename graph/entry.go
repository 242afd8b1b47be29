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

// typed fills the field of out named for e's kind from its payload (the
// payload as the viewer may read it: the feed has projected it). A payload
// that does not decode leaves the typed field null; the raw payload still
// carries it.
func typed(out *model.JournalEntry, e journal.Entry) {
	turnID := ""
	if e.TurnID.Valid {
		turnID = e.TurnID.UUID.String()
	}
	decode := func(p any) bool { return json.Unmarshal(e.Payload, p) == nil }
	switch e.Kind {
	case journal.KindTurnAccepted:
		var p journal.AcceptedPayload
		if decode(&p) {
			out.Accepted = &model.TurnAccepted{AuthorID: p.AuthorID.String(), AuthorName: p.AuthorName}
		}
	case journal.KindTurnStarted:
		var p journal.RecoveredPayload
		if decode(&p) {
			out.Started = &model.TurnStart{Attempt: int64(p.Attempt), AgentVersion: int64(p.AgentVersion), Recovered: p.Recovered}
		}
	case journal.KindAnswerDelta:
		out.Delta = toDelta(e)
	case journal.KindToolRequested:
		var p journal.ToolRequestedPayload
		if decode(&p) {
			out.Tool = &model.ToolActivity{CallID: p.CallID, Name: p.Name, Arguments: rawJSON(p.Arguments)}
		}
	case journal.KindToolCompleted:
		var p journal.ToolCompletedPayload
		if decode(&p) {
			bytes := int64(p.Bytes)
			out.Tool = &model.ToolActivity{CallID: p.CallID, Name: p.Name, Status: &p.Status, Bytes: &bytes, Citations: nonNil(p.Citations)}
		}
	case journal.KindApprovalRequested:
		var p journal.ApprovalRequestedPayload
		if decode(&p) {
			out.ApprovalRequest = &model.ApprovalRequest{ApprovalID: p.ApprovalID.String(), Tool: p.Tool, Arguments: rawJSON(p.Arguments), ExpiresAt: p.ExpiresAt}
		}
	case journal.KindApprovalDecided:
		var p journal.ApprovalDecidedPayload
		if decode(&p) {
			d := &model.ApprovalDecisionRecord{ApprovalID: p.ApprovalID.String(), State: model.ApprovalState(strings.ToUpper(p.Decision))}
			if p.DecidedBy != uuid.Nil {
				s := p.DecidedBy.String()
				d.DecidedBy = &s
			}
			out.ApprovalDecision = d
		}
	case journal.KindSteerDelivered:
		var p journal.SteerDeliveredPayload
		if decode(&p) {
			out.Steer = &model.SteerRecord{CommandID: p.CommandID.String(), ActorID: p.ActorID.String(), Text: p.Text, State: model.CommandStateDelivered}
		}
	case journal.KindSteerRejected:
		var p journal.SteerRejectedPayload
		if decode(&p) {
			out.Steer = &model.SteerRecord{CommandID: p.CommandID.String(), ActorID: p.ActorID.String(), Text: p.Text, State: model.CommandStateRejected}
		}
	case journal.KindCheckpoint:
		var p journal.CheckpointPayload
		if decode(&p) {
			out.Checkpoint = &model.CheckpointRecord{Steps: int64(p.Steps), ToolCalls: int64(p.ToolCalls), Messages: int64(p.Messages)}
		}
	case journal.KindCompaction:
		var p journal.CompactionPayload
		if decode(&p) {
			out.Compaction = &model.CompactionRecord{Summarised: int64(p.Summarised), TokensBefore: int64(p.TokensBefore), TokensAfter: int64(p.TokensAfter), Reused: p.Reused}
			if p.Through > 0 {
				out.Compaction.Through, out.Compaction.Turns = &p.Through, &p.Turns
			}
		}
	case journal.KindTurnAnswer:
		var p journal.AnswerPayload
		if decode(&p) {
			out.Answer = &model.TurnAnswer{Text: p.Text, Citations: toCitations(turnID, p.Citations), Artifacts: toAnswerArtifacts(turnID, p.Artifacts)}
		}
	case journal.KindTurnTerminal:
		var p journal.TerminalPayload
		if decode(&p) {
			out.Terminal = toTerminal(p.Outcome, p.Reason)
		}
	case journal.KindMemberJoined, journal.KindMemberLeft:
		var p room.MemberPayload
		if decode(&p) {
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
