package graph

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turngate/turngate/errcode"
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
			if !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0 || !Visible(text) {
				t.Fatalf("accepted text %q", text)
			}
			if !idempotencyKeyPattern.MatchString(key) || strings.IndexByte(room, 0) >= 0 || !utf8.ValidString(room) {
				t.Fatalf("accepted key %q room %q", key, room)
			}
		}
		if steerErr == nil && (len(text) > turn.MaxSteerText || !Visible(text) || strings.IndexByte(text, 0) >= 0) {
			t.Fatalf("accepted steer text %q", text)
		}
	})
}

// edgeCheck is the edge's path for one input: its strings as variables,
// then the validator.
func edgeCheck(vars map[string]any, in any) error {
	if err := checkValue("", vars); err != nil {
		return err
	}
	return check(in)
}

// FuzzCheckRawJSON: a request body the edge accepts decodes to exactly the
// text it spelled — no U+FFFD appears that the body did not contain —
// and nothing panics.
func FuzzCheckRawJSON(f *testing.F) {
	for _, s := range []string{
		`{"t":"plain"}`, `{"t":"\ud83d\ude00"}`, `{"t":"\ud800"}`, `{"t":"\\ud800"}`,
		"{\"t\":\"caf\xe9\"}", `{"t":"\udc00\ud800"}`, `{"t":"\ufffd"}`, `{"t":"\"\\"}`, `["\ud83d`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := CheckRawJSON(raw)
		if err != nil {
			if e, ok := errcode.From(err); !ok || e.Code != errcode.BadUserInput {
				t.Fatalf("refusal %v is not BAD_USER_INPUT", err)
			}
			return
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return // not JSON: the edge refuses it next
		}
		spelled := bytes.Contains(raw, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`))
		if !spelled && containsReplacement(v) {
			t.Fatalf("accepted %q decodes to U+FFFD", raw)
		}
	})
}

func containsReplacement(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, utf8.RuneError)
	case []any:
		for _, e := range v {
			if containsReplacement(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, utf8.RuneError) || containsReplacement(e) {
				return true
			}
		}
	}
	return false
}
