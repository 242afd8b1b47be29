package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// fakeChatCompletions is an OpenAI-compatible endpoint speaking the real
// streaming wire format: asked with tools and no tool result yet, it calls
// history_search; otherwise it answers. It keeps every request body.
type fakeChatCompletions struct{ modelRequests }

func (f *fakeChatCompletions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _, ok := f.record(w, r)
	if !ok {
		return
	}
	msgs, _ := body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta string, finish string) {
		fin := "null"
		if finish != "" {
			fin = fmt.Sprintf("%q", finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"local-model\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fin)
		w.(http.Flusher).Flush()
	}
	if _, hasTools := body["tools"]; hasTools && last["role"] != "tool" {
		chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"history_search","arguments":""}}]}`, "")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"query\":"}}]}`, "")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"launch\"}"}}]}`, "")
		chunk(`{}`, "tool_calls")
	} else {
		for _, word := range []string{"The launch ", "is on ", "Friday."} {
			chunk(fmt.Sprintf(`{"content":%q}`, word), "")
		}
		chunk(`{}`, "stop")
	}
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"local-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":7,\"total_tokens\":49}}\n\ndata: [DONE]\n\n")
}

func (f *fakeChatCompletions) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// TestOpenAIRoute: with TURNGATE_OPENAI_BASE_URL and
// TURNGATE_AGENT_ROUTE=openai the server's turns run on an
// OpenAI-compatible endpoint over its real streaming protocol: the model's
// tool call is executed as the member, its result goes back as a tool
// message, the streamed answer is the turn's answer, and the turn's
// message — and only it — carries the clock.
func TestOpenAIRoute(t *testing.T) {
	t.Parallel()
	fake := &fakeChatCompletions{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	h := servertest.New(t, func(c *server.Config) {
		c.OpenAI = gateway.OpenAIConfig{BaseURL: srv.URL, APIKey: "sk-local", Model: "local-model"}
		c.AgentRoute = "openai"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	var out struct {
		SubmitMessage struct{ ID string } `json:"submitMessage"`
	}
	if err := a.Do(ctx, `mutation($c: ID!) { submitMessage(input: {conversationId: $c, text: "When is the launch?", idempotencyKey: "openai-1"}) { id } }`,
		map[string]any{"c": team}, &out); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("postgres", h.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if state := servertest.WaitTurnState(t, ctx, db, out.SubmitMessage.ID); state != "completed" {
		t.Fatalf("turn ended %s", state)
	}
	var got struct {
		Turn struct {
			Answer string
			Usage  struct{ InputTokens, OutputTokens, ModelCalls, ToolCalls int }
		}
	}
	if err := a.Do(ctx, `query($id: ID!) { turn(id: $id) { answer usage { inputTokens outputTokens modelCalls toolCalls } } }`,
		map[string]any{"id": out.SubmitMessage.ID}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Turn.Answer != "The launch is on Friday." {
		t.Fatalf("answer %q", got.Turn.Answer)
	}
	if u := got.Turn.Usage; u.ModelCalls != 2 || u.ToolCalls != 1 || u.InputTokens != 84 || u.OutputTokens != 14 {
		t.Fatalf("usage %+v, want the provider's reported tokens for 2 calls and 1 tool call", u)
	}

	reqs := fake.requests()
	if len(reqs) != 2 {
		t.Fatalf("the endpoint got %d requests, want 2", len(reqs))
	}
	for i, body := range reqs {
		if body["model"] != "local-model" || body["stream"] != true {
			t.Errorf("request %d: model %v stream %v", i, body["model"], body["stream"])
		}
		carried := 0
		for _, m := range body["messages"].([]any) {
			msg := m.(map[string]any)
			content, _ := msg["content"].(string)
			if strings.Contains(content, "Current date and time:") {
				carried++
				if msg["role"] != "user" || !strings.HasSuffix(content, "When is the launch?") || !strings.Contains(content, `"Alice"`) {
					t.Errorf("request %d: the clock rides on %v %q", i, msg["role"], content)
				}
			}
		}
		if carried != 1 {
			t.Errorf("request %d: %d messages carry the clock, want 1", i, carried)
		}
	}
	msgs := reqs[1]["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["role"] != "tool" || last["tool_call_id"] != "call_1" {
		t.Fatalf("second request ends with %v, want the tool result for call_1", last)
	}
}
