package callback_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/tools"
)

// delegate runs a specialist of the roster as a nested controller with the
// turn's authority: its tool calls are journaled as the turn's, run as the
// member; its model calls carry no runtime context; its answer comes back
// as the tool result. A specialist outside the roster is refused.
func TestDelegateRunsASpecialistNested(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Specialists(t, []string{tools.DelegateName, tools.RetrievalName})
	model := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if n == 1 {
			return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
				{ID: "d1", Name: tools.DelegateName, Arguments: `{"specialist":"lawyer","task":"check the contract"}`},
				{ID: "d2", Name: tools.DelegateName, Arguments: `{"specialist":"researcher","task":"When is the launch?"}`}}}, nil
		}
		return nil, nil
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "Ask the researcher about the launch")
	if done := env.WaitTerminal(t, tt.ID); done.State != "completed" {
		t.Fatalf("turn ended %s", done.State)
	}
	var byCall = map[string]journal.ToolCompletedPayload{}
	for _, e := range env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindToolCompleted) {
		var p journal.ToolCompletedPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		byCall[p.CallID] = p
	}
	if p := byCall["d1"]; p.Status != callback.ToolForbidden {
		t.Fatalf("delegating outside the roster: %+v", p)
	}
	nested, d2 := byCall["delegate-call_1"], byCall["d2"]
	if nested.Name != tools.RetrievalName || nested.Status != callback.ToolOK || len(nested.Citations) == 0 {
		t.Fatalf("the specialist's own search: %+v", nested)
	}
	if d2.Status != callback.ToolOK || len(d2.Citations) == 0 || d2.Citations[0] != nested.Citations[0] {
		t.Fatalf("the delegation's result %+v, want the specialist's citations", d2)
	}
	sawSpecialist := false
	for _, req := range model.Requests() {
		for _, m := range req.Messages {
			if strings.HasPrefix(m.Content, "You are a research specialist") {
				sawSpecialist = true
				for _, m2 := range req.Messages {
					if m2.Context != "" {
						t.Fatalf("a specialist's model call carries the runtime context: %+v", m2)
					}
				}
			}
		}
	}
	if !sawSpecialist {
		t.Fatal("no model call ran as the specialist")
	}
}
