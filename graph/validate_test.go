package graph

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/turn"
)

// TestSteerInputValidation: steerTurn's input is checked at the edge —
// canonical UUIDs, and 1 to turn.MaxSteerText bytes of non-blank text,
// counted in bytes, not characters.
func TestSteerInputValidation(t *testing.T) {
	const id = "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11"
	tests := []struct {
		name  string
		in    steerInput
		field string // "" when valid
	}{
		{"valid", steerInput{CommandID: id, TurnID: id, Text: "shorter, please"}, ""},
		{"upper-case UUIDs", steerInput{CommandID: strings.ToUpper(id), TurnID: id, Text: "x"}, ""},
		{"text at the limit", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("x", turn.MaxSteerText)}, ""},
		{"multibyte text at the limit", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("é", turn.MaxSteerText/2)}, ""},
		{"bad command id", steerInput{CommandID: "not-a-uuid", TurnID: id, Text: "x"}, "commandId"},
		{"braced command id", steerInput{CommandID: "{" + id + "}", TurnID: id, Text: "x"}, "commandId"},
		{"empty command id", steerInput{CommandID: "", TurnID: id, Text: "x"}, "commandId"},
		{"bad turn id", steerInput{CommandID: id, TurnID: "nope", Text: "x"}, "turnId"},
		{"empty text", steerInput{CommandID: id, TurnID: id, Text: ""}, "text"},
		{"blank text", steerInput{CommandID: id, TurnID: id, Text: " \n\t"}, "text"},
		{"text over the limit", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("x", turn.MaxSteerText+1)}, "text"},
		{"multibyte text over the limit in bytes", steerInput{CommandID: id, TurnID: id, Text: strings.Repeat("é", turn.MaxSteerText/2+1)}, "text"},
	}
	for _, tt := range tests {
		err := check(tt.in)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		e, ok := errcode.From(err)
		if !ok || e.Code != errcode.BadUserInput || e.Field != tt.field {
			t.Errorf("%s: err = %v, want BAD_USER_INPUT on %s", tt.name, err, tt.field)
		}
	}
}

// TestToUsage: a turn's usage column maps to Usage; NULL (a turn that has
// not ended) maps to null, and a column that is not a usage is an error.
func TestToUsage(t *testing.T) {
	raw, err := json.Marshal(turn.Usage{InputTokens: 120, OutputTokens: 34, ModelCalls: 2, ToolCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := toUsage(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.Usage{InputTokens: 120, OutputTokens: 34, ModelCalls: 2, ToolCalls: 1}); got == nil || *got != want {
		t.Fatalf("usage = %+v, want %+v", got, want)
	}
	for _, null := range []json.RawMessage{nil, json.RawMessage("null")} {
		if got, err := toUsage(null); got != nil || err != nil {
			t.Fatalf("usage of %q = %+v, %v; want nil", null, got, err)
		}
	}
	if _, err := toUsage(json.RawMessage(`"spent"`)); err == nil {
		t.Fatal("a usage that is not an object decoded")
	}
}
