package tools

import (
	"context"
	"encoding/json"
	"errors"
)

// DelegateName is the delegation tool's name.
const DelegateName = "delegate"

// Delegate runs a sub-agent — a specialist of the turn's effective roster —
// as a nested controller with the turn's authority and a budget carved
// from the turn's; its answer returns as the tool's result, with the
// lineage of what it cited. The backend runs it (it needs the runtime);
// this type describes it to models and registries.
type Delegate struct{}

// ErrBackendTool reports a tool only the backend's callback host can run.
var ErrBackendTool = errors.New("this tool is run by the backend's callback host")

// Spec implements Tool.
func (Delegate) Spec() Spec {
	return Spec{
		Name:        DelegateName,
		Description: "Ask a specialist of this turn's roster to do a task; its answer comes back as the result.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"specialist":{"type":"string"},"task":{"type":"string"}},"required":["specialist","task"]}`),
	}
}

// Permission implements Tool.
func (Delegate) Permission() string { return "" }

// Run implements Tool: the callback host runs delegations itself.
func (Delegate) Run(context.Context, Call) (Result, error) { return Result{}, ErrBackendTool }
