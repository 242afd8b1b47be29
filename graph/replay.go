package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/ent"
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
// turn's author; for another member of the room, tool results withheld,
// and no text at all when the turn's answer was withheld from the room.
// The caller has checked that viewer may see the turn.
func turnModelCalls(ctx context.Context, client *ent.Client, turns *turn.Service, viewer uuid.UUID, t *model.Turn, first *int64) ([]*model.ModelCall, error) {
	in := modelCallsInput{First: 50}
	if first != nil {
		in.First = *first
	}
	if err := check(in); err != nil {
		return nil, err
	}
	id := uuid.MustParse(t.ID)
	author := viewer.String() == t.AuthorID
	blank := false
	if !author {
		withheld, err := turns.Withheld(ctx, []uuid.UUID{id})
		if err != nil {
			return nil, err
		}
		blank = withheld[id]
	}
	rows, err := client.QueryContext(ctx, `
SELECT attempt, step, purpose, route, request, response, input_tokens, output_tokens, duration_ms, error, created_at
FROM model_calls WHERE turn_id = $1 ORDER BY attempt, step LIMIT $2`, id, in.First)
	if err != nil {
		return nil, fmt.Errorf("model calls of %s: %w", id, err)
	}
	defer rows.Close()
	var out []*model.ModelCall
	for rows.Next() {
		var c model.ModelCall
		var rawReq, rawResp []byte
		var errText string
		var at time.Time
		if err := rows.Scan(&c.Attempt, &c.Step, &c.Purpose, &c.Route, &rawReq, &rawResp, &c.InputTokens, &c.OutputTokens,
			&c.DurationMs, &errText, &at); err != nil {
			return nil, err
		}
		var req callback.StoredRequest
		var resp callback.StoredResponse
		if err := json.Unmarshal(rawReq, &req); err != nil {
			return nil, fmt.Errorf("decode model call %d/%d of %s: %w", c.Attempt, c.Step, id, err)
		}
		if err := json.Unmarshal(rawResp, &resp); err != nil {
			return nil, fmt.Errorf("decode model call %d/%d of %s: %w", c.Attempt, c.Step, id, err)
		}
		c.ID = fmt.Sprintf("%s/%d/%d", id, c.Attempt, c.Step)
		c.At = at
		c.OmittedMessages = int64(req.Omitted)
		c.Tools = append([]string{}, req.Tools...)
		c.Truncated = req.Truncated || resp.Truncated
		c.FinishReason = resp.FinishReason
		if errText != "" {
			c.Error = &errText
		}
		c.Text = resp.Text
		if blank {
			c.Text = ""
		}
		c.ToolCalls = toModelToolCalls(resp.ToolCalls)
		if blank {
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
	return out, rows.Err()
}

func toModelToolCalls(calls []gateway.ToolCall) []*model.ModelToolCall {
	out := []*model.ModelToolCall{}
	for _, tc := range calls {
		out = append(out, &model.ModelToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out
}
