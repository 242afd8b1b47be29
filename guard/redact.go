package guard

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Pattern is a named regular expression (RE2 syntax, see [regexp/syntax])
// whose matches are redacted.
type Pattern struct {
	// Name labels the redaction marker, e.g. "email" or "api_key".
	Name string
	// Expr is the regular expression.
	Expr string
}

// DefaultPatterns returns the built-in patterns: PEM private key blocks
// ("private_key"; a block whose END line is missing is redacted to the end
// of the text), bearer tokens ("bearer_token"), GitHub tokens
// ("github_token"), AWS access key ids ("aws_access_key_id"), "sk-..."
// style API keys ("api_key") and email addresses ("email"). Where two
// patterns match at the same position the earlier one wins. The returned
// slice is a fresh copy.
func DefaultPatterns() []Pattern {
	return []Pattern{
		{Name: "private_key", Expr: `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)`},
		{Name: "bearer_token", Expr: `(?i:\bbearer)[ \t]+[A-Za-z0-9._~+/-]{20,}=*`},
		{Name: "github_token", Expr: `\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`},
		{Name: "aws_access_key_id", Expr: `\bAKIA[0-9A-Z]{16}\b`},
		{Name: "api_key", Expr: `\bsk-[A-Za-z0-9_-]{16,}`},
		{Name: "email", Expr: `[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`},
	}
}

// Redactor replaces matches of its patterns with "[redacted:<name>]". It is
// immutable and safe for concurrent use. A nil *Redactor redacts nothing.
type Redactor struct {
	re     *regexp.Regexp // the patterns as one leftmost-first alternation
	names  []string       // names[i] is the name of pattern i
	groups []int          // groups[i] is the submatch index wrapping pattern i
}

// NewRedactor compiles patterns into a Redactor. Every pattern needs a
// name; an expression that does not compile, or that matches the empty
// string, is an error naming the pattern. No patterns is valid and yields a
// Redactor that redacts nothing.
func NewRedactor(patterns []Pattern) (*Redactor, error) {
	r := &Redactor{}
	alts := make([]string, 0, len(patterns))
	group := 1
	for i, p := range patterns {
		if p.Name == "" {
			return nil, fmt.Errorf("guard: pattern %d has no name", i)
		}
		re, err := regexp.Compile(p.Expr)
		if err != nil {
			return nil, fmt.Errorf("guard: pattern %q: %w", p.Name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("guard: pattern %q matches the empty string", p.Name)
		}
		alts = append(alts, "("+p.Expr+")")
		r.names = append(r.names, p.Name)
		r.groups = append(r.groups, group)
		group += 1 + re.NumSubexp()
	}
	if len(alts) == 0 {
		return r, nil
	}
	re, err := regexp.Compile(strings.Join(alts, "|"))
	if err != nil {
		return nil, fmt.Errorf("guard: combining patterns: %w", err)
	}
	r.re = re
	return r, nil
}

// Redact replaces each non-empty match with "[redacted:<name>]" and returns
// the result and the number of replacements. Matches are found in one
// left-to-right pass, so they never overlap and a marker is never redacted
// again.
func (r *Redactor) Redact(s string) (string, int) {
	if r == nil || r.re == nil {
		return s, 0
	}
	var b strings.Builder
	n, last := 0, 0
	for _, m := range r.re.FindAllStringSubmatchIndex(s, -1) {
		if m[0] == m[1] {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString("[redacted:")
		b.WriteString(r.name(m))
		b.WriteString("]")
		last = m[1]
		n++
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

// name reports which pattern produced the submatch indices m.
func (r *Redactor) name(m []int) string {
	for i, g := range r.groups {
		if m[2*g] >= 0 {
			return r.names[i]
		}
	}
	return "unknown" // unreachable: one alternative always matched
}

// RedactJSON redacts every string of a JSON value and keeps it JSON: what
// an approval shows its approver and what the effect then sends are the
// same redacted bytes. A value that is not JSON is redacted as text and
// returned as a JSON string.
func (r *Redactor) RedactJSON(raw []byte) []byte {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		s, _ := r.Redact(string(raw))
		b, _ := json.Marshal(s)
		return b
	}
	b, err := json.Marshal(r.redactValue(v))
	if err != nil {
		return []byte("null")
	}
	return b
}

func (r *Redactor) redactValue(v any) any {
	switch x := v.(type) {
	case string:
		s, _ := r.Redact(x)
		return s
	case []any:
		for i := range x {
			x[i] = r.redactValue(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = r.redactValue(x[k])
		}
	}
	return v
}
