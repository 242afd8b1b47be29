package extension

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turngate/turngate/errcode"
)

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
