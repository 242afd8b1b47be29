package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// CompactionPrompt is the instruction of a compaction step.
const CompactionPrompt = "Summarise the conversation below for your own later use. " +
	"Keep every fact, name, number, decision and citation id that could matter; drop pleasantries. " +
	"Answer with the summary only."

// react alternates model steps and tool requests until the model answers:
// at each step boundary it takes the member's steering, compacts the
// conversation when it would exceed the context budget, asks for one model
// step, and when that step requests tools, asks the backend to run them and
// checkpoints the round.
type react struct{}

// reactState is the controller's working memory, all of it in the
// checkpoint.
type reactState struct {
	c         Contract
	messages  []Message
	compacted *Message
	steers    []string
}

func newReactState(c Contract) *reactState {
	s := &reactState{c: c}
	if cp := c.Resume; cp != nil {
		s.messages = append([]Message(nil), cp.Messages...)
		s.compacted = cp.Compacted
		s.steers = append([]string(nil), cp.Steers...)
	}
	return s
}

// prompt is the whole conversation of the next step.
func (s *reactState) prompt() []Message {
	msgs := make([]Message, 0, len(s.c.History)+len(s.messages)+3)
	if s.c.System != "" {
		msgs = append(msgs, Message{Role: RoleSystem, Content: s.c.System})
	}
	if s.compacted != nil {
		msgs = append(msgs, *s.compacted)
	} else {
		msgs = append(msgs, s.c.History...)
	}
	msgs = append(msgs, s.c.Message)
	return append(msgs, s.messages...)
}

func (s *reactState) checkpoint(comp *Compaction) Checkpoint {
	return Checkpoint{Run: s.c.Run, Messages: s.messages, Compacted: s.compacted, Steers: s.steers, Compaction: comp}
}

// steer applies steering instructions not applied before.
func (s *reactState) steer(steers []Steer) bool {
	applied := false
	for _, st := range steers {
		if contains(s.steers, st.ID) {
			continue
		}
		s.steers = append(s.steers, st.ID)
		s.messages = append(s.messages, Message{Role: RoleUser, Content: "Steering from the member for this answer: " + st.Text})
		applied = true
	}
	return applied
}

func (react) Run(ctx context.Context, c Contract, cb Callbacks) error {
	s := newReactState(c)
	// Steering an earlier attempt took after its last checkpoint.
	s.steer(c.Steering)
	for {
		steers, err := cb.Steering(ctx, c.Run)
		if err != nil {
			return err
		}
		if s.steer(steers) {
			if err := cb.Checkpoint(ctx, s.checkpoint(nil)); err != nil {
				return err
			}
		}
		if EstimateTokens(s.prompt()) > c.Budgets.ContextTokens {
			if err := s.compact(ctx, cb); err != nil {
				return err
			}
		}
		res, err := cb.Model(ctx, ModelRequest{Run: c.Run, Purpose: PurposeStep, Messages: s.prompt(), Tools: c.Tools}, nil)
		if err != nil {
			return err
		}
		if len(res.ToolCalls) == 0 {
			// Steering that came while the answer streamed gets one more
			// step, which answers with it; otherwise this is the answer.
			steers, err := cb.Steering(ctx, c.Run)
			if err != nil {
				return err
			}
			if len(steers) == 0 {
				if err := s.compactAhead(ctx, cb, res.Text); err != nil {
					return err
				}
				return complete(ctx, cb, c.Run, s.prompt(), res.Text)
			}
			s.messages = append(s.messages, Message{Role: RoleAssistant, Content: res.Text})
			s.steer(steers)
			if err := cb.Checkpoint(ctx, s.checkpoint(nil)); err != nil {
				return err
			}
			continue
		}
		s.messages = append(s.messages, Message{Role: RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls})
		for _, call := range res.ToolCalls {
			r, err := cb.Tool(ctx, ToolRequest{Run: c.Run, Call: call})
			if err != nil {
				return err
			}
			content := r.Content
			if r.Error != "" && content == "" {
				content = "The tool failed: " + r.Error
			}
			s.messages = append(s.messages, Message{Role: RoleTool, Content: content, ToolCallID: call.ID})
		}
		if err := cb.Checkpoint(ctx, s.checkpoint(nil)); err != nil {
			return err
		}
	}
}

// complete hands the answer to the backend and, when the backend declines
// it for correction, asks for one corrected answer — the answer and the
// backend's instruction appended, no tools — and completes with that.
func complete(ctx context.Context, cb Callbacks, run RunRef, msgs []Message, answer string) error {
	err := cb.Complete(ctx, Completion{Run: run, Answer: answer})
	var cn *CorrectionNeeded
	if !errors.As(err, &cn) {
		return err
	}
	msgs = append(slices.Clip(msgs),
		Message{Role: RoleAssistant, Content: answer},
		Message{Role: RoleUser, Content: cn.Prompt})
	res, err := cb.Model(ctx, ModelRequest{Run: run, Purpose: PurposeCorrection, Messages: msgs}, nil)
	if err != nil {
		return err
	}
	return cb.Complete(ctx, Completion{Run: run, Answer: res.Text})
}

// compactAhead summarises the room's history once the answer has
// streamed, before the turn completes, when the next turn would otherwise
// start with more than half the context budget of history: the room's
// next turn then starts from the summary, and no member waits for a
// compaction before its first token.
func (s *reactState) compactAhead(ctx context.Context, cb Callbacks, answer string) error {
	if s.compacted != nil || len(s.c.History) == 0 || s.c.Budgets.ContextTokens <= 0 {
		return nil
	}
	next := append(slices.Clip(s.c.History), s.c.Message, Message{Role: RoleAssistant, Content: answer})
	if 2*EstimateTokens(next) <= s.c.Budgets.ContextTokens {
		return nil
	}
	return s.compactHistory(ctx, cb)
}

// compactHistory replaces the contract's history with its summary, which
// the backend keeps as the room's.
func (s *reactState) compactHistory(ctx context.Context, cb Callbacks) error {
	before := EstimateTokens(s.prompt())
	res, err := cb.Model(ctx, ModelRequest{Run: s.c.Run, Purpose: PurposeCompaction, Messages: HistoryCompaction(s.c.History)}, nil)
	if err != nil {
		return err
	}
	through := s.c.History[len(s.c.History)-1].Position
	s.compacted = &Message{Role: RoleSystem, Content: SummaryPrefix + res.Text, Position: through}
	comp := &Compaction{Summarised: len(s.c.History), TokensBefore: before, TokensAfter: EstimateTokens(s.prompt()), Through: through}
	return cb.Checkpoint(ctx, s.checkpoint(comp))
}

// compact asks for a summary of the room's history first — of it alone,
// so the backend may keep it for the room's later turns — and, when the
// prompt is still too long, of everything before the last tool round (the
// summary and older rounds of this turn), replacing what it summarised.
// The turn's own message is never summarised.
func (s *reactState) compact(ctx context.Context, cb Callbacks) error {
	if s.compacted == nil && len(s.c.History) > 0 {
		if err := s.compactHistory(ctx, cb); err != nil {
			return err
		}
		if EstimateTokens(s.prompt()) <= s.c.Budgets.ContextTokens {
			return nil
		}
	}
	keep := 0
	for i, m := range s.messages {
		if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
			keep = i
		}
	}
	var old []Message
	if s.compacted != nil {
		old = append(old, *s.compacted)
	} else {
		old = append(old, s.c.History...)
	}
	old = append(old, s.messages[:keep]...)
	if keep == 0 && (s.compacted != nil || len(s.c.History) == 0) {
		return nil // nothing new that may be summarised
	}
	before := EstimateTokens(s.prompt())
	res, err := cb.Model(ctx, ModelRequest{Run: s.c.Run, Purpose: PurposeCompaction, Messages: HistoryCompaction(old)}, nil)
	if err != nil {
		return err
	}
	s.compacted = &Message{Role: RoleSystem, Content: SummaryPrefix + res.Text}
	s.messages = append([]Message(nil), s.messages[keep:]...)
	return cb.Checkpoint(ctx, s.checkpoint(&Compaction{Summarised: len(old), TokensBefore: before, TokensAfter: EstimateTokens(s.prompt())}))
}

// SummaryPrefix begins the system message that stands for summarised
// messages; the room's stored summary is that message's text.
const SummaryPrefix = "Summary of the earlier conversation: "

// HistoryCompaction is the request of a compaction step over msgs: the
// instruction and their transcript. The backend recognises a summary of
// the room's history by it.
func HistoryCompaction(msgs []Message) []Message {
	return []Message{
		{Role: RoleSystem, Content: CompactionPrompt},
		{Role: RoleUser, Content: Transcript(msgs)},
	}
}

// Transcript renders messages as plain text, one per paragraph.
func Transcript(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "%s: %s", m.Role, m.Content)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "\n(called %s with %s)", tc.Name, tc.Arguments)
		}
	}
	return b.String()
}

// EstimateTokens is a cheap, provider-independent estimate of the tokens
// messages take: about four bytes a token, plus a little per message.
func EstimateTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += 4 + len(m.Content)/4
		for _, tc := range m.ToolCalls {
			n += 4 + (len(tc.Name)+len(tc.Arguments))/4
		}
	}
	return n
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
