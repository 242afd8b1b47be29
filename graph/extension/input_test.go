package extension

import (
	"strings"
	"testing"

	"github.com/turngate/turngate/errcode"
)

// TestCheckRawJSON: invalid UTF-8 and \u escapes of lone surrogates are
// refused; valid pairs, escaped backslashes and surrogate-looking text
// outside strings are not.
func TestCheckRawJSON(t *testing.T) {
	tests := []struct {
		raw string
		ok  bool
	}{
		{`{"t":"plain"}`, true},
		{`{"t":"pair \ud83d\ude00"}`, true},
		{`{"t":"PAIR \uD83D\uDE00"}`, true},
		{`{"t":"escaped backslash \\ud800"}`, true},
		{`{"t":"quote \" then \u00e9"}`, true},
		{`{"t":"é ✓ 😀"}`, true},
		{`{"t":"lone high \ud800"}`, false},
		{`{"t":"lone high at the end \ud83d"}`, false},
		{`{"t":"high then text \ud83dx"}`, false},
		{`{"t":"lone low \udc00"}`, false},
		{`{"t":"two highs \ud83d\ud83d"}`, false},
		{`{"t":"reversed \ude00\ud83d"}`, false},
		{"{\"t\":\"caf\xe9\"}", false},
		{"{\"t\":\"\xed\xa0\x80\"}", false}, // a surrogate encoded as UTF-8
	}
	for _, tt := range tests {
		err := CheckRawJSON([]byte(tt.raw))
		if (err == nil) != tt.ok {
			t.Errorf("%q: err = %v, want ok %v", tt.raw, err, tt.ok)
		}
		if err != nil && !errorsIsBadInput(err) {
			t.Errorf("%q: err = %v, want BAD_USER_INPUT", tt.raw, err)
		}
	}
}

func errorsIsBadInput(err error) bool {
	e, ok := errcode.From(err)
	return ok && e.Code == errcode.BadUserInput
}

// TestVisible: text is visible when it has something other than spaces,
// control, format and filler characters.
func TestVisible(t *testing.T) {
	for _, s := range []string{"", " ", "\n\t", "\u200b", "\u200b\u200c\u200d\u2060\ufeff", "\u00ad", "\u3164\u115f\u1160", "\u2028\u2029", "\u202e\u202d", "\u00a0\u3000"} {
		if Visible(s) {
			t.Errorf("%q counts as visible", s)
		}
	}
	for _, s := range []string{"a", " hi ", "\u200bé", "😀", "你好", "١", "-"} {
		if !Visible(s) {
			t.Errorf("%q counts as invisible", s)
		}
	}
}

// TestCheckString: NUL and invalid UTF-8 are refused, naming the argument.
func TestCheckString(t *testing.T) {
	if err := CheckString("text", "fine ✓"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a\x00b", "\x00", "caf\xe9", strings.Repeat("x", 10) + "\xff"} {
		err := CheckString("text", s)
		e, ok := errcode.From(err)
		if !ok || e.Code != errcode.BadUserInput || e.Field != "text" {
			t.Errorf("%q: err = %v", s, err)
		}
	}
}
