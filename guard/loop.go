package guard

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Reasons a [LoopGuard] refuses a call.
const (
	ReasonToolNotAllowed = "tool_not_allowed"
	ReasonRepeatedCall   = "repeated_call"
)

// DefaultMaxRepeats is the number of identical calls a [LoopGuard] allows
// when none is configured.
const DefaultMaxRepeats = 2

// Verdict is a [LoopGuard] decision.
type Verdict struct {
	Allowed bool
	// Reason is empty when Allowed, otherwise ReasonToolNotAllowed or
	// ReasonRepeatedCall.
	Reason string
	// Message explains a refusal in words fit to return to the model as the
	// tool result.
	Message string
}

// LoopGuard refuses tool calls that leave a run's allow-list or repeat
// without progress. Use one per run; it is safe for concurrent use.
type LoopGuard struct {
	maxRepeats int
	allowed    map[string]struct{}
	names      string // the allowed tools, sorted, for messages

	mu     sync.Mutex
	counts map[string]int // tool + "\x00" + canonical arguments -> calls
}

// NewLoopGuard returns a guard that allows the tools in allowed (an empty
// list allows none) and at most maxRepeats identical calls to each, the
// (maxRepeats+1)-th being refused; maxRepeats <= 0 means
// [DefaultMaxRepeats]. Calls are identical when they name the same tool
// and their arguments are the same JSON value, whatever the key order and
// whitespace; arguments that are not valid JSON are compared as raw
// strings.
func NewLoopGuard(maxRepeats int, allowed []string) *LoopGuard {
	if maxRepeats <= 0 {
		maxRepeats = DefaultMaxRepeats
	}
	g := &LoopGuard{
		maxRepeats: maxRepeats,
		allowed:    make(map[string]struct{}, len(allowed)),
		counts:     make(map[string]int),
	}
	for _, t := range allowed {
		g.allowed[t] = struct{}{}
	}
	names := make([]string, 0, len(g.allowed))
	for t := range g.allowed {
		names = append(names, t)
	}
	slices.Sort(names)
	g.names = strings.Join(names, ", ")
	return g
}

// Check decides whether the call may run and, if it is an allowed tool,
// counts it.
func (g *LoopGuard) Check(tool, arguments string) Verdict {
	if _, ok := g.allowed[tool]; !ok {
		msg := fmt.Sprintf("tool %q is not available in this run", tool)
		if g.names != "" {
			msg += "; available tools: " + g.names
		}
		return Verdict{Reason: ReasonToolNotAllowed, Message: msg}
	}
	key := tool + "\x00" + canonicalJSON(arguments)
	g.mu.Lock()
	g.counts[key]++
	n := g.counts[key]
	g.mu.Unlock()
	if n > g.maxRepeats {
		return Verdict{
			Reason: ReasonRepeatedCall,
			Message: fmt.Sprintf("tool %q has already been called %d times with these arguments, the limit for this run; "+
				"use the earlier results instead of calling it again, or change the arguments", tool, g.maxRepeats),
		}
	}
	return Verdict{Allowed: true}
}

// canonicalJSON re-encodes s as compact JSON with object keys sorted and
// numbers kept as written; s is returned unchanged if it is not exactly one
// JSON value.
func canonicalJSON(s string) string {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return s
	}
	if _, err := dec.Token(); err != io.EOF {
		return s // trailing data
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}
