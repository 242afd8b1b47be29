package graph

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/extension"
	"github.com/turngate/turngate/turn"
)

// FuzzSubmitInput: submitMessage's and steerTurn's inputs, run through the
// edge's checks. Nothing panics; every refusal is BAD_USER_INPUT; and an
// accepted input is what the database may store and a person can read:
// valid UTF-8, no NUL, visible text, a well-formed key.
func FuzzSubmitInput(f *testing.F) {
	for _, s := range []struct{ text, key, room string }{
		{"hello", "key-1", "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11"},
		{"", "", ""},
		{"a\x00b", "k", "room"},
		{"\u200b\u200c", "k", "room"},
		{"caf\xe9", "k", "room"},
		{"\xed\xa0\x80", "k", "room"},
		{"😀 ok", strings.Repeat("k", 128), "WEB_abc"},
		{" \t\n", "k:k.k_k-k", "room"},
		{"\u3164", "two words", "room"},
	} {
		f.Add(s.text, s.key, s.room)
	}
	f.Fuzz(func(t *testing.T, text, key, room string) {
		in := submitInput{ConversationID: room, Text: text, IdempotencyKey: key}
		err := edgeCheck(map[string]any{"conversationId": room, "text": text, "idempotencyKey": key}, in)
		steer := steerInput{CommandID: "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11", TurnID: "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e12", Text: text}
		steerErr := edgeCheck(map[string]any{"text": text}, steer)
		for _, err := range []error{err, steerErr} {
			if err == nil {
				continue
			}
			if e, ok := errcode.From(err); !ok || e.Code != errcode.BadUserInput {
				t.Fatalf("refusal %v is not BAD_USER_INPUT", err)
			}
		}
		if err == nil {
			if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 || !extension.Visible(text) {
				t.Fatalf("accepted text %q", text)
			}
			if !idempotencyKeyPattern.MatchString(key) || strings.IndexByte(room, 0) >= 0 || !utf8.ValidString(room) {
				t.Fatalf("accepted key %q room %q", key, room)
			}
		}
		if steerErr == nil && (len(text) > turn.MaxSteerText || !extension.Visible(text) || strings.IndexByte(text, 0) >= 0) {
			t.Fatalf("accepted steer text %q", text)
		}
	})
}

// edgeCheck is the edge's path for one input: its strings as variables,
// then the validator.
func edgeCheck(vars map[string]any, in any) error {
	if err := extension.CheckValue("", vars); err != nil {
		return err
	}
	return check(in)
}
