package runtime

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Every type that crosses Callbacks is plain data: it survives a JSON
// round trip unchanged, so the runtime can run behind the same contract as
// a process of its own.
func TestPortTypesRoundTripThroughJSON(t *testing.T) {
	t.Parallel()
	ref := RunRef{TurnID: "t", Attempt: 2, LeaseToken: 9, BundleDigest: "abc"}
	call := ToolCall{ID: "c1", Name: "search", Arguments: `{"q":"x"}`}
	msgs := []Message{{Role: RoleUser, Content: "hi", Origin: OriginTurn}, {Role: RoleAssistant, ToolCalls: []ToolCall{call}}, {Role: RoleTool, ToolCallID: "c1", Content: "r"}}
	for _, v := range []any{
		Contract{Run: ref, AgentVersion: 3, Controller: "react", System: "s", History: msgs, Message: msgs[0],
			Budgets:  Budgets{MaxSteps: 1, MaxToolCalls: 2, MaxTokens: 3, WallTimeMs: 4, ContextTokens: 5},
			Tools:    []ToolSpec{{Name: "search", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}},
			Resume:   &Checkpoint{Run: ref, Steps: 1, Messages: msgs, Compacted: &msgs[0], Steers: []string{"s1"}, Compaction: &Compaction{Summarised: 2, TokensBefore: 3, TokensAfter: 1}},
			Steering: []Steer{{ID: "s2", Text: "brief"}}},
		ModelRequest{Run: ref, Purpose: PurposeStep, Messages: msgs, Tools: []ToolSpec{{Name: "search"}}},
		ModelDelta{Text: "x"},
		ModelResult{Text: "a", ToolCalls: []ToolCall{call}, FinishReason: "tool_calls", InputTokens: 1, OutputTokens: 2, Forced: true},
		ToolRequest{Run: ref, Call: call},
		ToolResult{CallID: "c1", Name: "search", Content: "r", Error: "forbidden"},
		Completion{Run: ref, Answer: "done"},
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		back := reflect.New(reflect.TypeOf(v))
		if err := json.Unmarshal(raw, back.Interface()); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !reflect.DeepEqual(back.Elem().Interface(), v) {
			t.Errorf("%T changed in a JSON round trip:\n%+v\n%+v", v, v, back.Elem().Interface())
		}
	}
}
