package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// Controller drives one run by calling back into the backend.
type Controller interface {
	Run(ctx context.Context, c Contract, cb Callbacks) error
}

// registry is static: controllers are compiled in, never loaded.
var registry = map[string]func() Controller{
	"single": func() Controller { return single{} },
	"react":  func() Controller { return react{} },
}

// Controllers lists the registered controller names.
func Controllers() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Default budgets, for a contract that leaves one at zero.
const (
	DefaultMaxSteps      = 8
	DefaultMaxToolCalls  = 16
	DefaultWallTime      = 5 * time.Minute
	DefaultContextTokens = 8000
)

var (
	// ErrUnknownController refuses a contract naming no registered
	// controller.
	ErrUnknownController = errors.New("unknown controller")
	// ErrAlreadyCompleted refuses a second completion of one run, and any
	// call after it.
	ErrAlreadyCompleted = errors.New("run already completed")
	// ErrNotCompleted reports a controller that returned without
	// completing.
	ErrNotCompleted = errors.New("controller returned without completing the run")
	// ErrBudgetExhausted refuses a model step after the run's forced
	// synthesis: the run had its last word.
	ErrBudgetExhausted = errors.New("run budget exhausted")
	// ErrWallTime stops a run that overran twice its wall-time budget.
	ErrWallTime = errors.New("run exceeded its wall-time budget")
)

// SynthesisPrompt is the instruction of a forced synthesis step. It is the
// host's own prompt: it carries no runtime context.
const SynthesisPrompt = "The budget for this turn is spent: no more tools can be called. " +
	"Using only the evidence already gathered above, answer the member's message now, as well as it can be answered."

// Admit checks that a contract names a registered controller.
func Admit(c Contract) error {
	if _, ok := registry[c.Controller]; !ok {
		return fmt.Errorf("%w %q", ErrUnknownController, c.Controller)
	}
	return nil
}

// Run creates one controller for the contract and runs it under the
// host's budgets and lifecycle rules.
func Run(ctx context.Context, c Contract, cb Callbacks) error {
	newController, ok := registry[c.Controller]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownController, c.Controller)
	}
	c.Budgets = c.Budgets.withDefaults()
	h := newHost(c, cb, time.Now)
	// The hard stop: twice the wall-time budget. The soft one, at the
	// budget itself, turns the next step into forced synthesis.
	ctx, cancel := context.WithTimeoutCause(ctx, 2*time.Duration(c.Budgets.WallTimeMs)*time.Millisecond, ErrWallTime)
	defer cancel()
	err := newController().Run(ctx, c, h)
	if cause := context.Cause(ctx); errors.Is(cause, ErrWallTime) && !h.completed() {
		return ErrWallTime
	}
	if err != nil {
		return err
	}
	if !h.completed() {
		return ErrNotCompleted
	}
	return nil
}

func (b Budgets) withDefaults() Budgets {
	if b.MaxSteps <= 0 {
		b.MaxSteps = DefaultMaxSteps
	}
	if b.MaxToolCalls <= 0 {
		b.MaxToolCalls = DefaultMaxToolCalls
	}
	if b.WallTimeMs <= 0 {
		b.WallTimeMs = DefaultWallTime.Milliseconds()
	}
	if b.ContextTokens <= 0 {
		b.ContextTokens = DefaultContextTokens
	}
	return b
}

// host applies the contract's budgets and the lifecycle rules to the
// controller's callbacks.
type host struct {
	next    Callbacks
	budgets Budgets
	tools   []string
	started time.Time
	clock   func() time.Time

	mu          sync.Mutex
	steps       int
	toolCalls   int
	tokens      int
	synthesised bool
	corrected   bool
	done        bool
}

var _ Callbacks = (*host)(nil)

func newHost(c Contract, next Callbacks, clock func() time.Time) *host {
	h := &host{next: next, budgets: c.Budgets, started: clock(), clock: clock}
	for _, t := range c.Tools {
		h.tools = append(h.tools, t.Name)
	}
	if c.Resume != nil {
		h.steps, h.toolCalls = c.Resume.Steps, c.Resume.ToolCalls
	}
	return h
}

func (h *host) completed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

// spent reports whether the run must answer now: its steps, its tool
// calls or its wall time ran out.
func (h *host) spent() bool {
	return h.steps >= h.budgets.MaxSteps ||
		h.toolCalls >= h.budgets.MaxToolCalls ||
		h.clock().Sub(h.started) >= time.Duration(h.budgets.WallTimeMs)*time.Millisecond ||
		(h.budgets.MaxTokens > 0 && h.tokens >= h.budgets.MaxTokens)
}

func (h *host) Model(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (ModelResult, error) {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return ModelResult{}, ErrAlreadyCompleted
	}
	if h.synthesised {
		h.mu.Unlock()
		return ModelResult{}, ErrBudgetExhausted
	}
	forced := false
	switch req.Purpose {
	case PurposeCompaction:
		// Compaction spends tokens, not steps.
	case PurposeCorrection:
		// One correction, asked for by the backend, whatever the budgets.
		if h.corrected {
			h.mu.Unlock()
			return ModelResult{}, ErrBudgetExhausted
		}
		h.corrected = true
		req.Tools = nil
	case PurposeSynthesis:
		forced, h.synthesised = true, true
	default:
		if h.spent() {
			forced, h.synthesised = true, true
		} else {
			h.steps++
		}
	}
	h.mu.Unlock()
	if forced {
		// One last step, without tools, that answers from the evidence
		// already gathered.
		req.Purpose = PurposeSynthesis
		req.Tools = nil
		req.Messages = append(slices.Clip(req.Messages), Message{Role: RoleUser, Content: SynthesisPrompt})
	}
	res, err := h.next.Model(ctx, req, onDelta)
	if err != nil {
		return res, err
	}
	h.mu.Lock()
	h.tokens += res.InputTokens + res.OutputTokens
	h.mu.Unlock()
	if forced || req.Purpose == PurposeCorrection {
		res.Forced, res.ToolCalls = forced, nil
	}
	return res, nil
}

func (h *host) Tool(ctx context.Context, req ToolRequest) (ToolResult, error) {
	h.mu.Lock()
	switch {
	case h.done:
		h.mu.Unlock()
		return ToolResult{}, ErrAlreadyCompleted
	case h.toolCalls >= h.budgets.MaxToolCalls:
		h.mu.Unlock()
		return ToolResult{CallID: req.Call.ID, Name: req.Call.Name, Error: "tool_budget_exhausted",
			Content: "The tool-call budget of this turn is spent; answer from what you have."}, nil
	}
	h.toolCalls++
	h.mu.Unlock()
	// A tool the contract does not offer goes to the backend like any
	// other: its loop guard refuses it and stops the loop, with a reason.
	return h.next.Tool(ctx, req)
}

func (h *host) Checkpoint(ctx context.Context, cp Checkpoint) error {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return ErrAlreadyCompleted
	}
	// The host's count of spent budget is the one that resumes.
	cp.Steps, cp.ToolCalls = h.steps, h.toolCalls
	h.mu.Unlock()
	return h.next.Checkpoint(ctx, cp)
}

func (h *host) Steering(ctx context.Context, run RunRef) ([]Steer, error) {
	if h.completed() {
		return nil, ErrAlreadyCompleted
	}
	return h.next.Steering(ctx, run)
}

func (h *host) Complete(ctx context.Context, c Completion) error {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return ErrAlreadyCompleted
	}
	if ctx.Err() != nil {
		h.mu.Unlock()
		return ctx.Err()
	}
	h.done = true
	h.mu.Unlock()
	err := h.next.Complete(ctx, c)
	var cn *CorrectionNeeded
	if errors.As(err, &cn) {
		// Declined for correction: the run may complete once more.
		h.mu.Lock()
		h.done = false
		h.mu.Unlock()
	}
	return err
}
