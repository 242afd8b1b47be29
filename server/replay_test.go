package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

const replayQuery = `query($id: ID!, $n: Int) { turn(id: $id) { modelCalls(first: $n) {
  id attempt step purpose route omittedMessages tools text finishReason inputTokens outputTokens durationMs error truncated at
  messages { role content toolCallId withheld toolCalls { id name arguments } }
  toolCalls { id name arguments }
} } }`

type replayCall struct {
	ID           string   `json:"id"`
	Attempt      int      `json:"attempt"`
	Step         int      `json:"step"`
	Purpose      string   `json:"purpose"`
	Route        string   `json:"route"`
	Tools        []string `json:"tools"`
	Text         string   `json:"text"`
	FinishReason string   `json:"finishReason"`
	InputTokens  int      `json:"inputTokens"`
	OutputTokens int      `json:"outputTokens"`
	Error        *string  `json:"error"`
	Messages     []struct {
		Role     string `json:"role"`
		Content  string `json:"content"`
		Withheld bool   `json:"withheld"`
	} `json:"messages"`
	ToolCalls []struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"toolCalls"`
}

func replayOf(ctx context.Context, c *gqlclient.Client, id string, first any) ([]replayCall, error) {
	var out struct {
		Turn struct {
			ModelCalls []replayCall `json:"modelCalls"`
		} `json:"turn"`
	}
	err := c.Do(ctx, replayQuery, map[string]any{"id": id, "n": first}, &out)
	return out.Turn.ModelCalls, err
}

// TestTurnReplay: every model call of a turn is stored and readable
// through turn.modelCalls in order — what the model was asked (the
// member's message, the tool results) and what it answered — by the
// turn's author in full; another member of the room reads the calls
// with the tool results withheld (gathered with the author's
// permissions); someone outside the room reads nothing; the page size
// is bounded.
func TestTurnReplay(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b, m := h.Client(t, alice), h.Client(t, bob), h.Client(t, mallory)
	team := servertest.Rooms(t, a)["Team room"].ID
	accepted, err := citationSubmitAs(ctx, a, team, "When is the launch?", "replay-1", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := servertest.AwaitTurnEnd(t, ctx, a, accepted.ID)
	if done.State != "COMPLETED" || done.Answer == nil {
		t.Fatalf("turn ended %s", done.State)
	}
	calls, err := replayOf(ctx, a, accepted.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 2 {
		t.Fatalf("%d model calls, want the search step and the answer", len(calls))
	}
	for i, c := range calls {
		if c.Step != i+1 || c.Attempt != 1 || c.Route == "" || c.Error != nil || c.ID != fmt.Sprintf("%s/1/%d", accepted.ID, i+1) {
			t.Fatalf("call %d = %+v", i, c)
		}
	}
	first, last := calls[0], calls[len(calls)-1]
	if len(first.ToolCalls) == 0 || len(first.Tools) == 0 {
		t.Fatalf("the first step asked for no tool: %+v", first)
	}
	asked := false
	for _, msg := range first.Messages {
		asked = asked || (msg.Role == "user" && msg.Content == "When is the launch?")
	}
	if !asked {
		t.Fatalf("the first request does not carry the member's message: %+v", first.Messages)
	}
	if last.Text != *done.Answer || last.FinishReason != "stop" || last.OutputTokens == 0 {
		t.Fatalf("the last call answered %q (%s), the turn %q", last.Text, last.FinishReason, *done.Answer)
	}
	var toolResult string
	for _, msg := range last.Messages {
		if msg.Role == "tool" {
			toolResult = msg.Content
		}
	}
	if !strings.Contains(strings.ToLower(toolResult), "launch") {
		t.Fatalf("the answer step's tool result = %q, want the retrieved passage", toolResult)
	}

	// Bob, in the room: the same calls, the tool results withheld.
	seen, err := replayOf(ctx, b, accepted.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(calls) {
		t.Fatalf("bob reads %d calls, alice %d", len(seen), len(calls))
	}
	for _, msg := range seen[len(seen)-1].Messages {
		if msg.Role == "tool" && (!msg.Withheld || strings.Contains(msg.Content, toolResult)) {
			t.Fatalf("bob reads a tool result: %+v", msg)
		}
	}
	if _, err := replayOf(ctx, m, accepted.ID, nil); gqlclient.CodeOf(err) != "NOT_FOUND" {
		t.Fatalf("mallory reading the replay: %v, want NOT_FOUND", err)
	}
	if got, err := replayOf(ctx, a, accepted.ID, 1); err != nil || len(got) != 1 {
		t.Fatalf("first: 1 = %d calls, %v", len(got), err)
	}
	for _, n := range []int{0, 201} {
		if _, err := replayOf(ctx, a, accepted.ID, n); gqlclient.CodeOf(err) != "BAD_USER_INPUT" {
			t.Fatalf("first: %d = %v, want BAD_USER_INPUT", n, err)
		}
	}
}
