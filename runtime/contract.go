package runtime

import "context"

// RunRef names one attempt of one turn, and travels with every callback so
// the backend can refuse a call from a run that no longer owns the turn.
type RunRef struct {
	TurnID       string `json:"turnId"`
	Attempt      int    `json:"attempt"`
	LeaseToken   int64  `json:"leaseToken"`
	BundleDigest string `json:"bundleDigest"`
}

// Message is one message of the model conversation.
type Message struct {
	Role    string `json:"role"` // system | user | assistant
	Content string `json:"content"`
	// Origin marks the message that started the turn (OriginTurn). The
	// backend attaches the turn's runtime context (the clock, the
	// member's name) to that message, and to no other, on every model
	// call; a controller's own prompts (corrections, synthesis) leave it
	// empty.
	Origin string `json:"origin,omitempty"`
}

// OriginTurn marks the member message that started the turn.
const OriginTurn = "turn"

// Budgets bound a run.
type Budgets struct {
	MaxSteps  int `json:"maxSteps"`
	MaxTokens int `json:"maxTokens"`
}

// Contract is the immutable description of one run, admitted by the
// backend. The runtime gets nothing else.
type Contract struct {
	Run        RunRef    `json:"run"`
	Controller string    `json:"controller"`
	System     string    `json:"system"`
	History    []Message `json:"history"`
	Message    Message   `json:"message"`
	Budgets    Budgets   `json:"budgets"`
}

// ModelRequest asks the backend for one model step.
type ModelRequest struct {
	Run      RunRef    `json:"run"`
	Messages []Message `json:"messages"`
}

// ModelDelta is a piece of streamed model output.
type ModelDelta struct {
	Text string `json:"text"`
}

// ModelResult is the whole of one model step.
type ModelResult struct {
	Text         string `json:"text"`
	FinishReason string `json:"finishReason"`
	InputTokens  int    `json:"inputTokens"`
	OutputTokens int    `json:"outputTokens"`
}

// Completion is a run's final answer.
type Completion struct {
	Run    RunRef `json:"run"`
	Answer string `json:"answer"`
}

// Callbacks is the runtime's only door to the backend.
type Callbacks interface {
	// Model runs one model step through the backend's model gateway,
	// streaming deltas to onDelta as they arrive.
	Model(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (ModelResult, error)
	// Complete hands the backend the run's final answer. A run completes
	// at most once.
	Complete(ctx context.Context, c Completion) error
}
