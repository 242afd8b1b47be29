package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Builtin is the deterministic local model: the same conversation always
// gets the same answer, token for token, so the server is useful offline
// and tests are repeatable. Offered a search tool, it asks for one when the
// member's message is a question that earlier material could answer, then
// answers from what came back, quoting and citing it. Otherwise it answers
// from the conversation: it restates the member's message, relates it to
// what was said before, and closes.
type Builtin struct {
	// Pace is the delay between tokens, so a person watching the stream
	// sees it arrive. Zero streams as fast as the reader takes it.
	Pace time.Duration
}

var _ Provider = Builtin{}

// SearchTools are the tools the builtin model knows how to use, in the
// order it prefers them.
var SearchTools = []string{"retrieval", "history_search"}

// Stream implements Provider.
func (b Builtin) Stream(ctx context.Context, req Request, emit func(Delta)) (Result, error) {
	res := BuiltinStep(req)
	in := 0
	for _, m := range req.Messages {
		in += len(Tokenize(m.Rendered()))
	}
	res.Usage = Usage{InputTokens: in}
	if len(res.ToolCalls) > 0 {
		for i := range res.ToolCalls {
			emit(Delta{ToolCall: &res.ToolCalls[i]})
		}
		res.Usage.OutputTokens = 8 * len(res.ToolCalls)
		emit(Delta{Usage: &res.Usage})
		emit(Delta{Finish: res.FinishReason})
		return res, nil
	}
	tokens := Tokenize(res.Text)
	if req.MaxOutputTokens > 0 && len(tokens) > req.MaxOutputTokens {
		tokens = tokens[:req.MaxOutputTokens]
		res.Text, res.FinishReason = strings.Join(tokens, ""), "length"
	}
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
	res.Usage.OutputTokens = len(tokens)
	emit(Delta{Usage: &res.Usage})
	emit(Delta{Finish: res.FinishReason})
	return res, nil
}

// BuiltinStep is the builtin model's whole answer to one request.
func BuiltinStep(req Request) Result {
	if req.Purpose == "compaction" {
		return Result{Text: builtinSummary(req.Messages), FinishReason: "stop"}
	}
	qi := questionIndex(req.Messages)
	if qi < 0 {
		return Result{Text: "There is no message to answer yet.", FinishReason: "stop"}
	}
	question := req.Messages[qi].Content
	var evidence []Message
	for _, m := range req.Messages[qi+1:] {
		if m.Role == "tool" {
			evidence = append(evidence, m)
		}
	}
	if tool := searchTool(req.Tools); tool != "" && len(evidence) == 0 && wantsSearch(question) {
		args, _ := json.Marshal(map[string]string{"query": keywords(question)})
		return Result{ToolCalls: []ToolCall{{ID: "call_1", Name: tool, Arguments: string(args)}}, FinishReason: "tool_calls"}
	}
	return Result{Text: builtinAnswer(req, qi, evidence), FinishReason: "stop"}
}

// questionIndex finds the member message the request answers: the one the
// backend marked with the turn's runtime context, or else the last member
// message.
func questionIndex(msgs []Message) int {
	last := -1
	for i, m := range msgs {
		if m.Role != "user" {
			continue
		}
		if m.Context != "" {
			return i
		}
		last = i
	}
	return last
}

func searchTool(offered []ToolSpec) string {
	for _, name := range SearchTools {
		if slices.ContainsFunc(offered, func(t ToolSpec) bool { return t.Name == name }) {
			return name
		}
	}
	return ""
}

var questionWords = []string{"what", "who", "when", "where", "which", "how", "why", "did", "does", "find", "search", "recall", "remind"}

func wantsSearch(q string) bool {
	if strings.Contains(q, "?") {
		return true
	}
	f := strings.Fields(strings.ToLower(q))
	return len(f) > 0 && slices.Contains(questionWords, strings.Trim(f[0], ",.:;!"))
}

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true, "in": true, "on": true, "for": true,
	"is": true, "are": true, "was": true, "were": true, "be": true, "do": true, "does": true, "did": true, "we": true, "you": true,
	"i": true, "me": true, "my": true, "our": true, "it": true, "this": true, "that": true, "what": true, "who": true, "when": true,
	"where": true, "which": true, "how": true, "why": true, "about": true, "with": true, "at": true, "from": true, "please": true,
	"find": true, "search": true, "tell": true, "can": true, "could": true, "would": true, "any": true, "there": true,
}

// keywords reduces a question to the words worth searching for.
func keywords(q string) string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !stopWords[w] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if len(out) > 8 {
		out = out[:8]
	}
	if len(out) == 0 {
		return oneLine(q)
	}
	return strings.Join(out, " ")
}

var citeLine = regexp.MustCompile(`^\[([^\]]+)\]\s*(.*)$`)

// builtinAnswer writes the answer to the question at qi.
func builtinAnswer(req Request, qi int, evidence []Message) string {
	msgs := req.Messages
	question := msgs[qi]
	var b strings.Builder
	fmt.Fprintf(&b, "You wrote: %q. ", clip(oneLine(question.Content), 400))
	if len(evidence) == 0 {
		words := len(strings.Fields(question.Content))
		fmt.Fprintf(&b, "That is %d word%s. ", words, plural(words))
		var earlier []string
		for _, m := range msgs[:qi] {
			if m.Role == "user" {
				earlier = append(earlier, m.Content)
			}
		}
		switch len(earlier) {
		case 0:
			b.WriteString("This is the first message of the conversation. ")
		default:
			fmt.Fprintf(&b, "Before it, this conversation holds %d earlier message%s; the one just before said %q. ",
				len(earlier), plural(len(earlier)), clip(oneLine(earlier[len(earlier)-1]), 120))
		}
	} else {
		var quoted []string
		for _, e := range evidence {
			for _, line := range strings.Split(e.Content, "\n") {
				m := citeLine.FindStringSubmatch(strings.TrimSpace(line))
				if m == nil || len(quoted) == 2 || slices.Contains(quoted, m[1]) {
					continue
				}
				fmt.Fprintf(&b, "I found: %q [%s]. ", clip(oneLine(m[2]), 200), m[1])
				quoted = append(quoted, m[1])
			}
		}
		if len(quoted) == 0 {
			fmt.Fprintf(&b, "I looked, and found nothing to quote: %q. ", clip(oneLine(evidence[len(evidence)-1].Content), 160))
		}
	}
	for _, m := range msgs[qi+1:] {
		if m.Role == "user" && strings.HasPrefix(m.Content, "Steering from the member") {
			fmt.Fprintf(&b, "As you asked while I worked: %q. ", clip(oneLine(strings.TrimPrefix(m.Content, "Steering from the member for this answer: ")), 200))
		}
	}
	if when := clockOf(question.Context); when != "" && mentionsTime(question.Content) {
		fmt.Fprintf(&b, "By my clock it is %s. ", when)
	}
	if req.Purpose == "synthesis" {
		b.WriteString("My budget for this turn ran out, so this answer rests on what I had gathered. ")
	}
	b.WriteString("I am turngate's builtin model: I answer deterministically from the conversation, so the same conversation always streams the same answer.")
	return b.String()
}

var clockPattern = regexp.MustCompile(`Current date and time: ([^(]+) \(timezone: UTC\)`)

func clockOf(ctx string) string {
	if m := clockPattern.FindStringSubmatch(ctx); m != nil {
		return m[1]
	}
	return ""
}

func mentionsTime(q string) bool {
	q = strings.ToLower(q)
	for _, w := range []string{"today", "date", "time", "day", "tomorrow", "yesterday"} {
		if strings.Contains(q, w) {
			return true
		}
	}
	return false
}

// builtinSummary is the builtin model's compaction: the first words of
// every message, one line each.
func builtinSummary(msgs []Message) string {
	var lines []string
	for _, m := range msgs {
		if m.Role == "system" {
			continue
		}
		for _, para := range strings.Split(m.Content, "\n\n") {
			lines = append(lines, "- "+clip(oneLine(para), 80))
		}
	}
	return strings.Join(lines, "\n")
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
