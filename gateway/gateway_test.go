package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// recorder keeps the request a provider received.
type recorder struct{ got Request }

func (r *recorder) Stream(_ context.Context, req Request, emit func(Delta)) (Result, error) {
	r.got = req
	emit(Delta{Text: "ok"})
	return Result{Text: "ok", FinishReason: "stop"}, nil
}

func TestGatewayRoutesByProviderAndModel(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := New(map[string]Provider{"openai": rec})
	if _, err := g.Stream(context.Background(), "openai:small", Request{Effort: "high"}, nil); err != nil {
		t.Fatal(err)
	}
	if rec.got.Model != "small" || rec.got.Effort != "high" {
		t.Fatalf("provider got model %q effort %q", rec.got.Model, rec.got.Effort)
	}
	if _, err := g.Stream(context.Background(), "nowhere", Request{}, nil); !errors.Is(err, ErrUnknownRoute) {
		t.Fatalf("unknown route = %v", err)
	}
}

func TestGatewayPolicy(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := New(map[string]Provider{"openai": rec}).WithPolicy(Policy{AllowedRoutes: []string{"openai:small"}, DeniedTools: []string{"send_webhook"}})
	if _, err := g.Stream(context.Background(), "openai:large", Request{}, nil); !errors.Is(err, ErrModelNotAllowed) {
		t.Fatalf("a model outside the policy = %v, want ErrModelNotAllowed", err)
	}
	if _, err := g.Stream(context.Background(), "openai:small", Request{Tools: []ToolSpec{{Name: "retrieval"}, {Name: "send_webhook"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.got.Tools) != 1 || rec.got.Tools[0].Name != "retrieval" {
		t.Fatalf("provider was offered %+v, want the denied tool filtered out", rec.got.Tools)
	}
}

func TestGatewayTokenBudget(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := New(map[string]Provider{"builtin": rec})
	if _, err := g.Run(context.Background(), Step{Route: "builtin", Bounded: true, TokenBudget: 0}, nil); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("a spent budget = %v, want ErrBudgetExhausted", err)
	}
	if _, err := g.Run(context.Background(), Step{Route: "builtin", Bounded: true, TokenBudget: 50, Request: Request{MaxOutputTokens: 400}}, nil); err != nil {
		t.Fatal(err)
	}
	if rec.got.MaxOutputTokens != 50 {
		t.Fatalf("output bounded to %d, want the 50 tokens left", rec.got.MaxOutputTokens)
	}
}

func TestBuiltinAsksForSearchThenCitesWhatCameBack(t *testing.T) {
	t.Parallel()
	turnMsg := Message{Role: "user", Content: "When is the launch?", Context: TurnContextForTest}
	tools := []ToolSpec{{Name: "history_search"}}
	first := BuiltinStep(Request{Messages: []Message{turnMsg}, Tools: tools})
	if len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != "history_search" || !strings.Contains(first.ToolCalls[0].Arguments, "launch") {
		t.Fatalf("first step = %+v, want a search for the launch", first)
	}
	second := BuiltinStep(Request{Tools: tools, Messages: []Message{turnMsg,
		{Role: "assistant", ToolCalls: first.ToolCalls},
		{Role: "tool", ToolCallID: "call_1", Content: "[turn:42] (Team room) The launch moves to Friday."},
	}})
	if len(second.ToolCalls) != 0 || !strings.Contains(second.Text, `"(Team room) The launch moves to Friday." [turn:42]`) {
		t.Fatalf("second step = %+v, want an answer quoting and citing turn:42", second)
	}
	// Without a search tool, or for a statement, it answers directly.
	if r := BuiltinStep(Request{Messages: []Message{turnMsg}}); len(r.ToolCalls) != 0 {
		t.Fatal("asked for a tool it was not offered")
	}
	if r := BuiltinStep(Request{Messages: []Message{{Role: "user", Content: "Noted."}}, Tools: tools}); len(r.ToolCalls) != 0 {
		t.Fatal("searched for a statement")
	}
	// Deterministic: the same request, the same answer.
	if a, b := BuiltinStep(Request{Messages: []Message{turnMsg}}), BuiltinStep(Request{Messages: []Message{turnMsg}}); a.Text != b.Text {
		t.Fatal("the builtin model is not deterministic")
	}
}

const TurnContextForTest = "Current date and time: Friday, 4 December 2026, 08:30 UTC (timezone: UTC)."

func TestBuiltinStreamsTokensAndHonoursTheOutputBound(t *testing.T) {
	t.Parallel()
	var text strings.Builder
	var finish string
	res, err := Builtin{}.Stream(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hello there"}}, MaxOutputTokens: 3},
		func(d Delta) {
			text.WriteString(d.Text)
			if d.Finish != "" {
				finish = d.Finish
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.OutputTokens != 3 || len(Tokenize(text.String())) != 3 || res.FinishReason != "length" || finish != "length" {
		t.Fatalf("streamed %q (%d tokens), finish %q/%q", text.String(), res.Usage.OutputTokens, res.FinishReason, finish)
	}
}
