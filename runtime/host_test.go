package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// scripted is a backend whose model answers from a script: each step
// returns the next result, or asks for a tool while the script says so.
type scripted struct {
	mu          sync.Mutex
	model       func(n int, req ModelRequest) ModelResult
	requests    []ModelRequest
	tools       []ToolRequest
	checkpoints []Checkpoint
	steers      [][]Steer
	completions []Completion
}

func (s *scripted) Model(_ context.Context, req ModelRequest, _ func(ModelDelta)) (ModelResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	return s.model(len(s.requests), req), nil
}

func (s *scripted) Tool(_ context.Context, req ToolRequest) (ToolResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools = append(s.tools, req)
	return ToolResult{CallID: req.Call.ID, Name: req.Call.Name, Content: "result of " + req.Call.Arguments}, nil
}

func (s *scripted) Checkpoint(_ context.Context, cp Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpoints = append(s.checkpoints, cp)
	return nil
}

func (s *scripted) Steering(context.Context, RunRef) ([]Steer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steers) == 0 {
		return nil, nil
	}
	next := s.steers[0]
	s.steers = s.steers[1:]
	return next, nil
}

func (s *scripted) Complete(_ context.Context, c Completion) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completions = append(s.completions, c)
	return nil
}

// alwaysTools asks for one search per step, forever, unless the step
// offers no tools.
func alwaysTools(n int, req ModelRequest) ModelResult {
	if len(req.Tools) == 0 {
		return ModelResult{Text: fmt.Sprintf("answer %d", n), FinishReason: "stop"}
	}
	return ModelResult{ToolCalls: []ToolCall{{ID: fmt.Sprintf("c%d", n), Name: "search", Arguments: fmt.Sprintf(`{"q":%d}`, n)}}, FinishReason: "tool_calls"}
}

func reactContract(b Budgets) Contract {
	return Contract{
		Run:        RunRef{TurnID: "t1", Attempt: 1, LeaseToken: 7, BundleDigest: "d"},
		Controller: "react",
		System:     "be helpful",
		Message:    Message{Role: RoleUser, Content: "what is new?", Origin: OriginTurn},
		Budgets:    b,
		Tools:      []ToolSpec{{Name: "search"}},
	}
}

func TestAdmitRefusesUnknownController(t *testing.T) {
	t.Parallel()
	c := reactContract(Budgets{})
	c.Controller = "plugin-from-disk"
	if err := Admit(c); !errors.Is(err, ErrUnknownController) {
		t.Fatalf("Admit = %v, want ErrUnknownController", err)
	}
	if err := Run(context.Background(), c, &scripted{}); !errors.Is(err, ErrUnknownController) {
		t.Fatalf("Run = %v, want ErrUnknownController", err)
	}
	for _, name := range []string{"single", "react"} {
		c.Controller = name
		if err := Admit(c); err != nil {
			t.Errorf("Admit(%s) = %v", name, err)
		}
	}
}

func TestReactRunsToolsUntilTheModelAnswers(t *testing.T) {
	t.Parallel()
	s := &scripted{model: func(n int, req ModelRequest) ModelResult {
		if n < 3 {
			return alwaysTools(n, req)
		}
		return ModelResult{Text: "done", FinishReason: "stop"}
	}}
	if err := Run(context.Background(), reactContract(Budgets{}), s); err != nil {
		t.Fatal(err)
	}
	if len(s.tools) != 2 || len(s.checkpoints) != 2 || len(s.completions) != 1 || s.completions[0].Answer != "done" {
		t.Fatalf("tools %d, checkpoints %d, completions %+v", len(s.tools), len(s.checkpoints), s.completions)
	}
	last := s.requests[2].Messages
	if got := last[len(last)-1]; got.Role != RoleTool || got.ToolCallID != "c2" || got.Content != `result of {"q":2}` {
		t.Fatalf("third step ends with %+v, want the second tool result", got)
	}
	if cp := s.checkpoints[1]; cp.Steps != 2 || cp.ToolCalls != 2 || len(cp.Messages) != 4 {
		t.Fatalf("checkpoint = steps %d, tools %d, %d messages", cp.Steps, cp.ToolCalls, len(cp.Messages))
	}
}

func TestForcedSynthesisWhenTheStepBudgetRunsOut(t *testing.T) {
	t.Parallel()
	s := &scripted{model: alwaysTools}
	if err := Run(context.Background(), reactContract(Budgets{MaxSteps: 2}), s); err != nil {
		t.Fatalf("a spent step budget must not fail the turn: %v", err)
	}
	if len(s.requests) != 3 {
		t.Fatalf("model steps = %d, want 2 and one forced synthesis", len(s.requests))
	}
	synth := s.requests[2]
	if synth.Purpose != PurposeSynthesis || len(synth.Tools) != 0 {
		t.Fatalf("last step purpose %q with %d tools, want synthesis without tools", synth.Purpose, len(synth.Tools))
	}
	if last := synth.Messages[len(synth.Messages)-1]; last.Content != SynthesisPrompt || last.Origin != "" {
		t.Fatalf("synthesis ends with %+v", last)
	}
	// It answers from the evidence gathered: both tool results are there.
	if n := strings.Count(Transcript(synth.Messages), "result of"); n != 2 {
		t.Fatalf("synthesis sees %d tool results, want 2", n)
	}
	if len(s.completions) != 1 || s.completions[0].Answer != "answer 3" {
		t.Fatalf("completions = %+v", s.completions)
	}
}

func TestForcedSynthesisWhenTheToolBudgetRunsOut(t *testing.T) {
	t.Parallel()
	s := &scripted{model: func(n int, req ModelRequest) ModelResult {
		if len(req.Tools) == 0 {
			return ModelResult{Text: "from what I have"}
		}
		return ModelResult{ToolCalls: []ToolCall{{ID: "a", Name: "search", Arguments: "1"}, {ID: "b", Name: "search", Arguments: "2"}}}
	}}
	if err := Run(context.Background(), reactContract(Budgets{MaxToolCalls: 1}), s); err != nil {
		t.Fatal(err)
	}
	if len(s.tools) != 1 {
		t.Fatalf("backend ran %d tools, want 1", len(s.tools))
	}
	if len(s.requests) != 2 || s.requests[1].Purpose != PurposeSynthesis {
		t.Fatalf("steps = %d, second purpose %q", len(s.requests), s.requests[len(s.requests)-1].Purpose)
	}
	if !strings.Contains(Transcript(s.requests[1].Messages), "budget of this turn is spent") {
		t.Fatal("the model is not told the second call was refused")
	}
}

func TestForcedSynthesisWhenWallTimeRunsOut(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	s := &scripted{model: alwaysTools}
	c := reactContract(Budgets{WallTimeMs: 1000}.withDefaults())
	h := newHost(c, s, func() time.Time { return now })
	if res, _ := h.Model(context.Background(), ModelRequest{Purpose: PurposeStep, Tools: c.Tools}, nil); res.Forced {
		t.Fatal("a step inside the wall time was forced")
	}
	now = now.Add(time.Second)
	res, err := h.Model(context.Background(), ModelRequest{Purpose: PurposeStep, Tools: c.Tools}, nil)
	if err != nil || !res.Forced || len(res.ToolCalls) != 0 {
		t.Fatalf("step past the wall time = %+v, %v; want forced synthesis", res, err)
	}
	if _, err := h.Model(context.Background(), ModelRequest{Purpose: PurposeStep}, nil); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("step after synthesis = %v, want ErrBudgetExhausted", err)
	}
}

// twice completes twice.
type twice struct{}

func (twice) Run(ctx context.Context, c Contract, cb Callbacks) error {
	if err := cb.Complete(ctx, Completion{Run: c.Run, Answer: "one"}); err != nil {
		return err
	}
	if err := cb.Complete(ctx, Completion{Run: c.Run, Answer: "two"}); !errors.Is(err, ErrAlreadyCompleted) {
		return fmt.Errorf("second completion = %v", err)
	}
	if _, err := cb.Model(ctx, ModelRequest{Run: c.Run}, nil); !errors.Is(err, ErrAlreadyCompleted) {
		return fmt.Errorf("model step after completion = %v", err)
	}
	return nil
}

// silent returns without completing.
type silent struct{}

func (silent) Run(context.Context, Contract, Callbacks) error { return nil }

func TestOneCompletionPerRun(t *testing.T) {
	registry["test-twice"] = func() Controller { return twice{} }
	registry["test-silent"] = func() Controller { return silent{} }
	s := &scripted{}
	c := reactContract(Budgets{})
	c.Controller = "test-twice"
	if err := Run(context.Background(), c, s); err != nil {
		t.Fatal(err)
	}
	if len(s.completions) != 1 || s.completions[0].Answer != "one" {
		t.Fatalf("backend saw completions %+v", s.completions)
	}
	c.Controller = "test-silent"
	if err := Run(context.Background(), c, s); !errors.Is(err, ErrNotCompleted) {
		t.Fatalf("a run that never completes = %v, want ErrNotCompleted", err)
	}
}

func TestCompactionSummarisesHistoryNotTheTurnMessage(t *testing.T) {
	t.Parallel()
	c := reactContract(Budgets{ContextTokens: 200})
	for i := range 20 {
		c.History = append(c.History, Message{Role: RoleUser, Content: strings.Repeat(fmt.Sprintf("old message %d ", i), 10)})
	}
	s := &scripted{model: func(n int, req ModelRequest) ModelResult {
		if req.Purpose == PurposeCompaction {
			return ModelResult{Text: "they talked about old messages"}
		}
		return ModelResult{Text: "answer"}
	}}
	if err := Run(context.Background(), c, s); err != nil {
		t.Fatal(err)
	}
	if len(s.requests) != 2 || s.requests[0].Purpose != PurposeCompaction {
		t.Fatalf("requests %d, first purpose %q; want compaction then the step", len(s.requests), s.requests[0].Purpose)
	}
	for _, m := range s.requests[0].Messages {
		if m.Origin != "" || strings.Contains(m.Content, "what is new?") {
			t.Fatalf("compaction saw the turn's own message: %+v", m)
		}
	}
	if len(s.checkpoints) != 1 || s.checkpoints[0].Compaction == nil || s.checkpoints[0].Compaction.Summarised != 20 {
		t.Fatalf("checkpoints = %+v", s.checkpoints)
	}
	step := s.requests[1].Messages
	if len(step) != 3 || !strings.Contains(step[1].Content, "they talked about old messages") || step[2].Origin != OriginTurn {
		t.Fatalf("step after compaction = %+v", step)
	}
}

func TestResumeContinuesFromTheCheckpoint(t *testing.T) {
	t.Parallel()
	c := reactContract(Budgets{MaxSteps: 2})
	c.Resume = &Checkpoint{Steps: 1, ToolCalls: 1, Steers: []string{"s1"}, Messages: []Message{
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "search", Arguments: "{}"}}},
		{Role: RoleTool, ToolCallID: "c1", Content: "found before the crash"},
	}}
	// Steering delivered to the dead attempt after its checkpoint comes
	// again in the contract; s1 was applied before it and is not repeated.
	c.Steering = []Steer{{ID: "s1", Text: "old"}, {ID: "s2", Text: "be brief"}}
	s := &scripted{model: alwaysTools}
	if err := Run(context.Background(), c, s); err != nil {
		t.Fatal(err)
	}
	first := Transcript(s.requests[0].Messages)
	if !strings.Contains(first, "found before the crash") || strings.Count(first, "Steering from the member") != 1 || !strings.Contains(first, "be brief") {
		t.Fatalf("first step of the new attempt:\n%s", first)
	}
	// One step was spent before the crash: one more, then synthesis.
	if len(s.requests) != 2 || s.requests[1].Purpose != PurposeSynthesis {
		t.Fatalf("requests = %d, last purpose %q", len(s.requests), s.requests[len(s.requests)-1].Purpose)
	}
}

func TestSteeringIsAppliedOnceAtTheNextStepBoundary(t *testing.T) {
	t.Parallel()
	s := &scripted{model: func(n int, req ModelRequest) ModelResult {
		if n == 1 {
			return alwaysTools(n, req)
		}
		return ModelResult{Text: "steered"}
	}}
	// The first boundary has nothing; the second delivers s1, and a
	// repeated delivery of s1 with s2 applies only s2.
	s.steers = [][]Steer{nil, {{ID: "s1", Text: "answer in French"}}}
	if err := Run(context.Background(), reactContract(Budgets{}), s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(Transcript(s.requests[0].Messages), "French") {
		t.Fatal("steering reached the model before it was delivered")
	}
	second := s.requests[1].Messages
	if last := second[len(second)-1]; last.Role != RoleUser || !strings.Contains(last.Content, "answer in French") || last.Origin != "" {
		t.Fatalf("second step ends with %+v, want the steering", last)
	}
	if cp := s.checkpoints[len(s.checkpoints)-1]; len(cp.Steers) != 1 || cp.Steers[0] != "s1" {
		t.Fatalf("checkpoint steers = %v", cp.Steers)
	}
}

// declining declines the first completion for correction.
type declining struct {
	*scripted
	declined bool
}

func (d *declining) Complete(ctx context.Context, c Completion) error {
	if !d.declined {
		d.declined = true
		return &CorrectionNeeded{Prompt: "cite your sources"}
	}
	return d.scripted.Complete(ctx, c)
}

// When the backend declines an answer for correction, the controller asks
// for one corrected answer — no tools, the instruction last and bare — and
// completes with it; a second correction step is refused.
func TestOneCorrectionStep(t *testing.T) {
	t.Parallel()
	s := &scripted{model: func(n int, req ModelRequest) ModelResult {
		if req.Purpose == PurposeCorrection {
			return ModelResult{Text: "corrected [doc:1]"}
		}
		return ModelResult{Text: "first"}
	}}
	d := &declining{scripted: s}
	if err := Run(context.Background(), reactContract(Budgets{}), d); err != nil {
		t.Fatal(err)
	}
	if len(s.completions) != 1 || s.completions[0].Answer != "corrected [doc:1]" {
		t.Fatalf("completions = %+v", s.completions)
	}
	corr := s.requests[len(s.requests)-1]
	if corr.Purpose != PurposeCorrection || len(corr.Tools) != 0 {
		t.Fatalf("last request %q with %d tools", corr.Purpose, len(corr.Tools))
	}
	msgs := corr.Messages
	if last := msgs[len(msgs)-1]; last.Content != "cite your sources" || last.Origin != "" || msgs[len(msgs)-2].Content != "first" {
		t.Fatalf("correction ends with %+v", msgs[len(msgs)-2:])
	}
	h := newHost(reactContract(Budgets{}).withBudgets(), s, time.Now)
	if _, err := h.Model(context.Background(), ModelRequest{Purpose: PurposeCorrection}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Model(context.Background(), ModelRequest{Purpose: PurposeCorrection}, nil); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("a second correction = %v, want refused", err)
	}
}

func (c Contract) withBudgets() Contract { c.Budgets = c.Budgets.withDefaults(); return c }
