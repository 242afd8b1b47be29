package callback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// Redaction applies to what a tool shows the model and to the answer —
// streamed and final: a document holding an email and a key never reaches
// the model, the journal or a subscriber in clear.
func TestRedactionOfProjectionsAndAnswers(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	secretKey := "sk-" + strings.Repeat("q7", 12)
	if _, err := resource.AddDocument(context.Background(), env.Client, resource.Document{
		Title:   "Vendor contacts",
		Body:    "The vendor escalation contact is carol.vendor@example.org and the sandbox key is " + secretKey + " for the vendor.",
		Readers: []string{env.Alice.Email},
	}); err != nil {
		t.Fatal(err)
	}
	env.Agent(t, "react", []string{tools.RetrievalName}, nil)
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Private(t, env.Alice).ID, "Who is the vendor escalation contact?")
	done := env.WaitTerminal(t, tt.ID)
	if done.State != "completed" {
		t.Fatalf("turn ended %s", done.State)
	}
	clear := []string{"carol.vendor@example.org", secretKey}
	for _, req := range model.Requests() {
		for _, m := range req.Messages {
			for _, c := range clear {
				if strings.Contains(m.Content, c) {
					t.Fatalf("the model saw %q in a %s message", c, m.Role)
				}
			}
		}
	}
	sawRedacted := false
	for _, e := range env.Entries(t, env.Private(t, env.Alice).ID) {
		for _, c := range clear {
			if strings.Contains(string(e.Payload), c) {
				t.Fatalf("journal entry %d (%s) holds %q", e.Seq, e.Kind, c)
			}
		}
		if e.Kind == journal.KindTurnAnswer && strings.Contains(string(e.Payload), "[redacted:email]") {
			sawRedacted = true
		}
	}
	if !sawRedacted || done.Answer == nil || strings.Contains(*done.Answer, "carol.vendor") {
		t.Fatalf("answer %v: want the contact quoted, redacted", done.Answer)
	}
}

var citedDoc = regexp.MustCompile(`\[(doc:[^\]]+)\]`)

// Citation discipline: citations of sources not retrieved in the turn are
// removed; an answer that cites none of the evidence gets one correction
// step (no tools, no runtime context on the instruction); the final
// answer's citations carry their lineage.
func TestCitationDiscipline(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.RetrievalName}, nil)
	model := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		switch {
		case n == 1:
			return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
				{ID: "call_1", Name: tools.RetrievalName, Arguments: `{"query":"launch"}`}}}, nil
		case req.Purpose == runtime.PurposeCorrection:
			// Cite the first passage the tool returned, and an invented one.
			var found string
			for _, m := range req.Messages {
				if m.Role == "tool" {
					found = citedDoc.FindStringSubmatch(m.Content)[1]
				}
			}
			return &gateway.Result{Text: fmt.Sprintf("The launch is on Friday [%s] [doc:invented#p9].", found), FinishReason: "stop"}, nil
		default:
			return &gateway.Result{Text: "The launch is on Friday.", FinishReason: "stop"}, nil
		}
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "When is the launch?")
	done := env.WaitTerminal(t, tt.ID)
	reqs := model.Requests()
	if len(reqs) != 3 || reqs[2].Purpose != runtime.PurposeCorrection || len(reqs[2].Tools) != 0 {
		t.Fatalf("requests: %d, last purpose %q; want step, step, one correction without tools", len(reqs), reqs[len(reqs)-1].Purpose)
	}
	for _, m := range reqs[2].Messages {
		if m.Context != "" && m.Content != "When is the launch?" {
			t.Fatalf("the correction prompt carries the runtime context: %+v", m)
		}
	}
	if done.Answer == nil || strings.Contains(*done.Answer, "invented") || !strings.Contains(*done.Answer, "[doc:") {
		t.Fatalf("answer %v: want the real citation kept and the invented one removed", done.Answer)
	}
	answers := env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindTurnAnswer)
	var p journal.AnswerPayload
	if err := json.Unmarshal(answers[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Citations) != 1 || p.Citations[0].Digest == "" || p.Citations[0].Source != "Launch plan" || p.Citations[0].Passage == "" {
		t.Fatalf("turn_answer citations %+v, want the one real source with its lineage", p.Citations)
	}
}

// Loop control: the same call repeated past the bound stops the tool
// loop with a clear reason, and the model answers without tools.
func TestLoopControlStopsRepeatedCalls(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.RetrievalName}, map[string]int64{"max_steps": 10})
	model := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if len(req.Tools) == 0 {
			return &gateway.Result{Text: "Stopping here.", FinishReason: "stop"}, nil
		}
		return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
			{ID: fmt.Sprintf("call_%d", n), Name: tools.RetrievalName, Arguments: `{"query": "launch"}`}}}, nil
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "When is the launch?")
	if done := env.WaitTerminal(t, tt.ID); done.State != "completed" {
		t.Fatalf("turn ended %s", done.State)
	}
	var statuses []string
	for _, e := range env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindToolCompleted) {
		var p journal.ToolCompletedPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, p.Status)
	}
	if strings.Join(statuses, ",") != "ok,ok,repeated_call" {
		t.Fatalf("tool statuses %v, want two runs and then the loop stopped", statuses)
	}
	reqs := model.Requests()
	// The fourth step offers no tools (then, as the answer cites none of
	// the evidence, one correction step follows).
	if len(reqs) < 4 || len(reqs[3].Tools) != 0 || reqs[3].Purpose != runtime.PurposeStep {
		t.Fatalf("%d requests; the fourth must be a step offering no tools", len(reqs))
	}
}

// A tool outside the agent version's list is refused by the backend and
// stops the loop too: the runtime cannot widen its own toolset.
func TestToolOutsideTheListIsRefused(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	model := &testkit.ScriptModel{Script: func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if n == 1 {
			return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
				{ID: "call_1", Name: tools.RetrievalName, Arguments: `{"query":"salary"}`}}}, nil
		}
		return &gateway.Result{Text: "I cannot search documents here.", FinishReason: "stop"}, nil
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "What are the salary bands?")
	env.WaitTerminal(t, tt.ID)
	completed := env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindToolCompleted)
	var p journal.ToolCompletedPayload
	if len(completed) != 1 || json.Unmarshal(completed[0].Payload, &p) != nil || p.Status != "tool_not_allowed" || len(p.Citations) != 0 {
		t.Fatalf("tool_completed = %+v", p)
	}
}
