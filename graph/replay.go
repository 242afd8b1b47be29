package graph

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/turn"
)

// modelCallsInput bounds turn replay: at most 200 calls per request.
type modelCallsInput struct {
	First int64 `json:"first" validate:"min=1,max=200"`
}

// withheldNotice replaces a tool result a viewer other than the turn's
// author may not read.
const withheldNotice = "[withheld: a tool result gathered with the author's permissions]"

// turnModelCalls is a turn's replay as viewer sees it: everything for the
// turn's author; for another member of the room, tool results withheld;
// and no text at all, for anyone, when the turn is withheld from the
// viewer (feed). The caller has checked that viewer may see the turn.
func turnModelCalls(ctx context.Context, turns *turn.Service, viewer uuid.UUID, t *model.Turn, first *int64, withheld bool) ([]*model.ModelCall, error) {
	in := modelCallsInput{First: 50}
	if first != nil {
		in.First = *first
	}
	if err := check(in); err != nil {
		return nil, err
	}
	id := uuid.MustParse(t.ID)
	author := viewer.String() == t.AuthorID
	blank := withheld
	calls, err := turns.ModelCalls(ctx, id, int(in.First))
	if err != nil {
		return nil, err
	}
	out := []*model.ModelCall{}
	for _, rc := range calls {
		req, resp := rc.Request, rc.Response
		c := model.ModelCall{
			ID: fmt.Sprintf("%s/%d/%d", id, rc.Attempt, rc.Step), Attempt: rc.Attempt, Step: rc.Step,
			Purpose: rc.Purpose, Route: rc.Route, InputTokens: rc.InputTokens, OutputTokens: rc.OutputTokens,
			DurationMs: rc.DurationMs, At: rc.At, OmittedMessages: int64(req.Omitted),
			Tools: append([]string{}, req.Tools...), Truncated: req.Truncated || resp.Truncated,
			FinishReason: resp.FinishReason, Text: resp.Text, ToolCalls: toModelToolCalls(resp.ToolCalls),
		}
		if rc.Error != "" {
			c.Error = &rc.Error
		}
		if blank {
			c.Text = ""
			for _, tc := range c.ToolCalls {
				tc.Arguments = "{}"
			}
		}
		for _, m := range req.Messages {
			mm := &model.ModelMessage{Role: m.Role, Content: m.Content, ToolCalls: toModelToolCalls(m.ToolCalls)}
			if m.ToolCallID != "" {
				mm.ToolCallID = &m.ToolCallID
			}
			if !author && (m.Role == "tool" || blank) {
				mm.Content, mm.Withheld = withheldNotice, true
			}
			c.Messages = append(c.Messages, mm)
		}
		out = append(out, &c)
	}
	return out, nil
}

func toModelToolCalls(calls []gateway.ToolCall) []*model.ModelToolCall {
	out := []*model.ModelToolCall{}
	for _, tc := range calls {
		out = append(out, &model.ModelToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out
}
