package runtime

import (
	"context"
	"encoding/json"
)

// RunRef names one attempt of one turn, and travels with every callback so
// the backend can refuse a call from a run that no longer owns the turn, or
// that presents another turn's authority.
type RunRef struct {
	TurnID       string `json:"turnId"`
	Attempt      int    `json:"attempt"`
	LeaseToken   int64  `json:"leaseToken"`
	BundleDigest string `json:"bundleDigest"`
}

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of the model conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Origin marks the message that started the turn (OriginTurn). The
	// backend attaches the turn's runtime context (the clock, the
	// member's name) to that message, and to no other, on every model
	// call; a controller's own prompts (corrections, synthesis) leave it
	// empty.
	Origin string `json:"origin,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Position is, on a history message, the journal position of the
	// earlier turn it comes from (of the last turn covered, on the room's
	// summary). The model never sees it.
	Position int64 `json:"position,omitempty"`
}

// OriginTurn marks the member message that started the turn.
const OriginTurn = "turn"

// ToolSpec is a tool the contract offers the run.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is one tool request of a model step.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Budgets bound a run. Zero means the host's default.
type Budgets struct {
	// MaxSteps bounds the model steps that may request tools; when it is
	// spent the host turns the next step into forced synthesis.
	MaxSteps int `json:"maxSteps"`
	// MaxToolCalls bounds tool requests over the run.
	MaxToolCalls int `json:"maxToolCalls"`
	// MaxTokens bounds input and output tokens over the run.
	MaxTokens int `json:"maxTokens"`
	// WallTimeMs bounds the run's wall time: past it, the next step is
	// forced synthesis, and twice past it the run is stopped.
	WallTimeMs int64 `json:"wallTimeMs"`
	// ContextTokens is the context budget: when the messages of a step
	// would exceed it, the controller compacts them first.
	ContextTokens int `json:"contextTokens"`
}

// Contract is the immutable description of one run, admitted by the
// backend. The runtime gets nothing else.
type Contract struct {
	Run          RunRef `json:"run"`
	AgentVersion int    `json:"agentVersion"`
	Controller   string `json:"controller"`
	System       string `json:"system"`
	// History is the room's earlier finished turns, oldest first, each
	// message with its turn's Position: the room's summary first when it
	// has one (a system message), then the turns after it.
	History []Message  `json:"history"`
	Message Message    `json:"message"`
	Budgets Budgets    `json:"budgets"`
	Tools   []ToolSpec `json:"tools"`
	// Resume is the last durable checkpoint of an earlier attempt of the
	// same turn; a controller continues from it rather than starting over.
	Resume *Checkpoint `json:"resume,omitempty"`
	// Steering is member steering delivered to an earlier attempt after
	// its last checkpoint: the controller applies it first.
	Steering []Steer `json:"steering,omitempty"`
}

// Step purposes: what a model step is for.
const (
	PurposeStep       = "step"
	PurposeSynthesis  = "synthesis"
	PurposeCompaction = "compaction"
	PurposeCorrection = "correction"
)

// ModelRequest asks the backend for one model step.
type ModelRequest struct {
	Run      RunRef     `json:"run"`
	Purpose  string     `json:"purpose"`
	Messages []Message  `json:"messages"`
	Tools    []ToolSpec `json:"tools,omitempty"`
}

// ModelDelta is a piece of streamed model output.
type ModelDelta struct {
	Text string `json:"text"`
}

// ModelResult is the whole of one model step.
type ModelResult struct {
	Text         string     `json:"text"`
	ToolCalls    []ToolCall `json:"toolCalls,omitempty"`
	FinishReason string     `json:"finishReason"`
	InputTokens  int        `json:"inputTokens"`
	OutputTokens int        `json:"outputTokens"`
	// Forced reports a step the host turned into forced synthesis because
	// a budget ran out: it offered no tools and asked for an answer.
	Forced bool `json:"forced,omitempty"`
}

// ToolRequest asks the backend to run one tool as the member.
type ToolRequest struct {
	Run  RunRef   `json:"run"`
	Call ToolCall `json:"call"`
}

// ToolResult is the member-safe projection of one tool call.
type ToolResult struct {
	CallID  string `json:"callId"`
	Name    string `json:"name"`
	Content string `json:"content"`
	// Error is set when the tool refused or failed; Content then tells
	// the model why.
	Error string `json:"error,omitempty"`
}

// Compaction records that a controller summarised earlier messages.
type Compaction struct {
	// Summarised is how many messages the summary replaced.
	Summarised   int `json:"summarised"`
	TokensBefore int `json:"tokensBefore"`
	TokensAfter  int `json:"tokensAfter"`
	// Through is set when the summary is of the contract's whole history
	// and nothing else: the position of its last message. The backend
	// then keeps the summary as the room's, which later turns read in
	// place of those turns and extend from there.
	Through int64 `json:"through,omitempty"`
}

// Checkpoint is a controller's durable progress: enough to resume the run
// in a replacement attempt.
type Checkpoint struct {
	Run RunRef `json:"run"`
	// Steps and ToolCalls are the budgets spent so far.
	Steps     int `json:"steps"`
	ToolCalls int `json:"toolCalls"`
	// Messages is the working conversation after the turn's own message:
	// assistant tool requests, tool results, steering, summaries.
	Messages []Message `json:"messages"`
	// Compacted replaces the contract's history when set: the summary of
	// it, and of anything else summarised.
	Compacted *Message `json:"compacted,omitempty"`
	// Steers are the ids of the steering instructions applied so far.
	Steers []string `json:"steers,omitempty"`
	// Compaction is set on the checkpoint that follows a compaction step.
	Compaction *Compaction `json:"compaction,omitempty"`
}

// Steer is one member steering instruction, delivered at a step boundary.
type Steer struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// Completion is a run's final answer.
type Completion struct {
	Run    RunRef `json:"run"`
	Answer string `json:"answer"`
}

// CorrectionNeeded is the backend declining a completion once, with the
// instruction for one correction step: the controller asks the model for
// a corrected answer (PurposeCorrection, no tools) and completes with it.
type CorrectionNeeded struct {
	Prompt string `json:"prompt"`
}

func (e *CorrectionNeeded) Error() string { return "the answer needs one correction: " + e.Prompt }

// Callbacks is the runtime's only door to the backend.
type Callbacks interface {
	// Model runs one model step through the backend's model gateway,
	// streaming deltas to onDelta as they arrive.
	Model(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (ModelResult, error)
	// Tool runs one tool as the member. A refusal is a result the model
	// is told about, not an error; an error ends the run.
	Tool(ctx context.Context, req ToolRequest) (ToolResult, error)
	// Checkpoint stores the run's progress durably.
	Checkpoint(ctx context.Context, cp Checkpoint) error
	// Steering claims the member steering waiting for this run.
	Steering(ctx context.Context, run RunRef) ([]Steer, error)
	// Complete hands the backend the run's final answer. A run completes
	// at most once; the backend may decline one answer with
	// *CorrectionNeeded.
	Complete(ctx context.Context, c Completion) error
}
