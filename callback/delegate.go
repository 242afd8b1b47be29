package callback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// Budgets a delegation carves from its turn.
const (
	delegateMaxSteps     = 4
	delegateMaxToolCalls = 4
	delegateWallTimeMs   = 60_000
)

// delegate runs a specialist of the turn's effective roster as a nested
// controller: the same member and authority, the specialist's own version
// (controller, prompt, route), its tools as far as this turn offers them
// (no further delegation), and a budget carved from the turn's. Its tool
// calls go through this host — run as the member, journaled, guarded —
// and its answer comes back as the result, with what it cited.
func (h *Host) delegate(ctx context.Context, call runtime.ToolCall) (string, tools.Result) {
	var args struct {
		Specialist string `json:"specialist"`
		Task       string `json:"task"`
	}
	if err := jsonDecode(call.Arguments, &args); err != nil || strings.TrimSpace(args.Task) == "" {
		return ToolBadArguments, tools.Result{Content: "delegate needs a specialist and a task."}
	}
	if !slices.Contains(h.bundle.Roster, args.Specialist) {
		return ToolForbidden, tools.Result{Content: fmt.Sprintf("FORBIDDEN: %q is not a specialist this turn may delegate to.", args.Specialist)}
	}
	sp, err := authority.LatestSpecialist(ctx, h.deps.Client, args.Specialist)
	if errors.Is(err, authority.ErrNoSpecialist) {
		return ToolForbidden, tools.Result{Content: fmt.Sprintf("FORBIDDEN: there is no specialist %q.", args.Specialist)}
	}
	if err != nil {
		return ToolFailed, tools.Result{Content: "The specialist could not be reached."}
	}
	av, err := h.deps.AgentVersion(ctx, sp.VersionID)
	if err != nil {
		return ToolFailed, tools.Result{Content: "The specialist could not be reached."}
	}
	child := runtime.Contract{
		Run:          h.ref,
		AgentVersion: av.Version,
		Controller:   av.Controller,
		System:       av.SystemPrompt,
		Message:      runtime.Message{Role: runtime.RoleUser, Content: args.Task},
		Budgets:      runtime.Budgets{MaxSteps: delegateMaxSteps, MaxToolCalls: delegateMaxToolCalls, WallTimeMs: delegateWallTimeMs},
	}
	for _, name := range av.Tools {
		if _, offered := h.tools[name]; offered && name != tools.DelegateName {
			t := h.tools[name].Spec()
			child.Tools = append(child.Tools, runtime.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	if err := runtime.Admit(child); err != nil {
		return ToolFailed, tools.Result{Content: fmt.Sprintf("The specialist %q cannot run: %v.", args.Specialist, err)}
	}
	sub := &delegateHost{parent: h, route: av.ModelRoute, effort: av.Effort}
	if err := runtime.Run(ctx, child, sub); err != nil {
		if ctx.Err() != nil || errors.Is(err, lease.ErrFenced) {
			return ToolFailed, tools.Result{Content: "The delegation was interrupted."}
		}
		return ToolFailed, tools.Result{Content: fmt.Sprintf("The specialist %q did not finish: %v.", args.Specialist, err)}
	}
	// What the specialist cited, with its lineage: its tools ran through
	// this host, so their evidence is the turn's.
	checked := guard.CheckCitations(sub.answer, &h.evidence)
	res := tools.Result{Content: fmt.Sprintf("Answer from the specialist %s:\n%s", args.Specialist, checked.Text)}
	h.mu.Lock()
	for _, id := range checked.Cited {
		l := h.lineage[id]
		res.Citations = append(res.Citations, l)
		if l.Document != uuid.Nil {
			res.Documents = append(res.Documents, l.Document)
		}
	}
	h.mu.Unlock()
	return ToolOK, res
}

// delegateHost is the callback host of a nested controller: its model
// steps go to the specialist's route and stream nowhere (its answer is a
// tool result, not the turn's answer); its tool calls are the turn's; it
// keeps no checkpoints and takes no steering.
type delegateHost struct {
	parent *Host
	route  string
	effort string
	answer string
}

var _ runtime.Callbacks = (*delegateHost)(nil)

func (d *delegateHost) Model(ctx context.Context, req runtime.ModelRequest, _ func(runtime.ModelDelta)) (runtime.ModelResult, error) {
	h := d.parent
	if err := h.check(req.Run); err != nil {
		return runtime.ModelResult{}, err
	}
	step := h.modelStep(req, d.route, d.effort, true)
	start := time.Now()
	res, err := h.deps.Gateway.Run(ctx, step, nil)
	h.recordCall(ctx, "delegate-"+req.Purpose, d.route, step, res, err, time.Since(start))
	if err != nil {
		return runtime.ModelResult{}, err
	}
	return h.settle(res, "delegate-"), nil
}

func (d *delegateHost) Tool(ctx context.Context, req runtime.ToolRequest) (runtime.ToolResult, error) {
	if req.Call.Name == tools.DelegateName {
		return runtime.ToolResult{CallID: req.Call.ID, Name: req.Call.Name, Error: "delegation_depth",
			Content: "A specialist cannot delegate further."}, d.parent.check(req.Run)
	}
	return d.parent.Tool(ctx, req)
}

func (d *delegateHost) Checkpoint(_ context.Context, cp runtime.Checkpoint) error {
	return d.parent.check(cp.Run)
}

func (d *delegateHost) Steering(_ context.Context, run runtime.RunRef) ([]runtime.Steer, error) {
	return nil, d.parent.check(run)
}

func (d *delegateHost) Complete(_ context.Context, c runtime.Completion) error {
	if err := d.parent.check(c.Run); err != nil {
		return err
	}
	d.answer = c.Answer
	return nil
}
