package journal

import (
	"time"

	"github.com/google/uuid"
)

// The payloads of the entries a turn writes, by kind. They are the
// journal's vocabulary: readers (resolvers, clients) decode them, the
// packages that make a turn's changes encode them.

// ApprovalRequestedPayload is the payload of an approval_requested entry.
type ApprovalRequestedPayload struct {
	ApprovalID uuid.UUID `json:"approvalId"`
	Tool       string    `json:"tool"`
	Arguments  string    `json:"arguments"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// ApprovalDecidedPayload is the payload of an approval_decided entry.
type ApprovalDecidedPayload struct {
	ApprovalID uuid.UUID `json:"approvalId"`
	Decision   string    `json:"decision"` // approved | rejected | expired
	DecidedBy  uuid.UUID `json:"decidedBy,omitempty"`
}

// CheckpointPayload is the payload of a checkpoint entry.
type CheckpointPayload struct {
	Steps     int `json:"steps"`
	ToolCalls int `json:"toolCalls"`
	Messages  int `json:"messages"`
}

// CompactionPayload is the payload of a compaction entry: what a
// controller summarised, not the summary itself. Through is set when the
// summary became the room's (it covers the room's turns through that
// position, Turns of them); Reused marks the entry that records a run
// starting from the room's stored summary rather than summarising.
type CompactionPayload struct {
	Summarised   int   `json:"summarised"`
	TokensBefore int   `json:"tokensBefore"`
	TokensAfter  int   `json:"tokensAfter"`
	Through      int64 `json:"through,omitempty"`
	Turns        int64 `json:"turns,omitempty"`
	Reused       bool  `json:"reused,omitempty"`
}

// SteerDeliveredPayload is the payload of a steer_delivered entry.
type SteerDeliveredPayload struct {
	CommandID uuid.UUID `json:"commandId"`
	ActorID   uuid.UUID `json:"actorId"`
	Text      string    `json:"text"`
}

// SteerRejectedPayload is the payload of a steer_rejected entry: a steering
// instruction the turn ended before delivering, journaled with the
// terminal that ended it. Reason is why (SteerRejectedTurnEnded); Outcome
// and TerminalReason are the turn's.
type SteerRejectedPayload struct {
	CommandID      uuid.UUID `json:"commandId"`
	ActorID        uuid.UUID `json:"actorId"`
	Text           string    `json:"text"`
	Reason         string    `json:"reason"`
	Outcome        string    `json:"outcome"`
	TerminalReason string    `json:"terminalReason"`
}

// SteerRejectedTurnEnded is the reason of a steer the turn ended before
// any step boundary could deliver it.
const SteerRejectedTurnEnded = "turn_ended"

// RecoveredPayload is the payload of the turn_started entry of a recovery.
type RecoveredPayload struct {
	StartedPayload
	Recovered bool `json:"recovered"`
}

// AcceptedPayload is the payload of a turn_accepted entry.
type AcceptedPayload struct {
	Text       string    `json:"text"`
	AuthorID   uuid.UUID `json:"authorId"`
	AuthorName string    `json:"authorName,omitempty"`
}

// AnswerPayload is the payload of a turn_answer entry: the answer, the
// sources it cites and the artifacts it references.
type AnswerPayload struct {
	Text      string           `json:"text"`
	Citations []AnswerCitation `json:"citations"`
	Artifacts []AnswerArtifact `json:"artifacts"`
}

// AnswerCitation is one source an answer cites, with its lineage.
type AnswerCitation struct {
	ID       string    `json:"id"`
	Document uuid.UUID `json:"document,omitempty"`
	Source   string    `json:"source"`
	Passage  string    `json:"passage"`
	Digest   string    `json:"digest,omitempty"`
}

// AnswerArtifact is one artifact an answer references: in a shared room
// the immutable room resource reference, in a private one the member's
// own artifact.
type AnswerArtifact struct {
	ArtifactID uuid.UUID `json:"artifactId"`
	ResourceID uuid.UUID `json:"resourceId,omitempty"`
	Name       string    `json:"name"`
	MediaType  string    `json:"mediaType"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
}

// TerminalPayload is the payload of a turn_terminal entry.
type TerminalPayload struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// StartedPayload is the payload of a turn_started entry.
type StartedPayload struct {
	Attempt      int    `json:"attempt"`
	AgentVersion int    `json:"agentVersion"`
	Runner       string `json:"runner"`
}

// DeltaPayload is the payload of an answer_delta entry. Offset is where
// Text starts in the attempt's answer, so a reader can tell a gap from a
// repeat.
type DeltaPayload struct {
	Text   string `json:"text"`
	Offset int    `json:"offset"`
}

// ToolRequestedPayload is the payload of a tool_requested entry.
type ToolRequestedPayload struct {
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolCompletedPayload is the payload of a tool_completed entry.
type ToolCompletedPayload struct {
	CallID string `json:"callId"`
	Name   string `json:"name"`
	// Status is ok, forbidden, refused, bad_arguments or failed.
	Status    string   `json:"status"`
	Bytes     int      `json:"bytes"`
	Citations []string `json:"citations"`
}
