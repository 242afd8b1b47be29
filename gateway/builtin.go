package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Builtin is the deterministic local model: the same conversation always
// gets the same answer, token for token, so the server is useful offline
// and tests are repeatable. It answers from the conversation: it restates
// the member's message, relates it to what was said before, and closes.
type Builtin struct {
	// Pace is the delay between tokens, so a person watching the stream
	// sees it arrive. Zero streams as fast as the reader takes it.
	Pace time.Duration
}

var _ Provider = Builtin{}

// Stream implements Provider.
func (b Builtin) Stream(ctx context.Context, req Request, emit func(Delta)) (Result, error) {
	answer := BuiltinAnswer(req.Messages)
	tokens := Tokenize(answer)
	var t *time.Ticker
	if b.Pace > 0 {
		t = time.NewTicker(b.Pace)
		defer t.Stop()
	}
	for _, tok := range tokens {
		if t != nil {
			select {
			case <-ctx.Done():
				return Result{}, ctx.Err()
			case <-t.C:
			}
		} else if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		emit(Delta{Text: tok})
	}
	in := 0
	for _, m := range req.Messages {
		in += len(Tokenize(m.Content))
	}
	return Result{Text: answer, FinishReason: "stop", InputTokens: in, OutputTokens: len(tokens)}, nil
}

// Tokenize splits text into the builtin model's tokens: each word with the
// whitespace that follows it, so the tokens concatenate back to the text.
func Tokenize(s string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, r := range s {
		space := r == ' ' || r == '\n' || r == '\t'
		if inSpace && !space {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// BuiltinAnswer is the builtin model's answer to a conversation.
func BuiltinAnswer(msgs []Message) string {
	var last string
	var earlier []string
	for _, m := range msgs {
		if m.Role != "user" {
			continue
		}
		if last != "" {
			earlier = append(earlier, last)
		}
		last = m.Content
	}
	var b strings.Builder
	if last == "" {
		b.WriteString("There is no message to answer yet.")
		return b.String()
	}
	fmt.Fprintf(&b, "You wrote: %q. ", clip(oneLine(last), 400))
	words := len(strings.Fields(last))
	fmt.Fprintf(&b, "That is %d word%s. ", words, plural(words))
	switch len(earlier) {
	case 0:
		b.WriteString("This is the first message of the conversation. ")
	default:
		fmt.Fprintf(&b, "Before it, this conversation holds %d earlier message%s; the one just before said %q. ",
			len(earlier), plural(len(earlier)), clip(oneLine(earlier[len(earlier)-1]), 120))
	}
	b.WriteString("I am turngate's builtin model: I answer deterministically from the conversation, so the same conversation always streams the same answer.")
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
