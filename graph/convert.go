package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
)

func toMember(m authority.Member) *model.Member {
	return &model.Member{ID: m.ID.String(), Email: m.Email, DisplayName: m.DisplayName}
}

func toEntMember(m *ent.Member) *model.Member {
	return &model.Member{ID: m.ID.String(), Email: m.Email, DisplayName: m.DisplayName}
}

// toRoomMember is a member's place in room (its members loaded with
// their member edge).
func toRoomMember(room string, rm *ent.RoomMember) *model.RoomMember {
	return &model.RoomMember{ID: room + ":" + rm.MemberID.String(), Member: toEntMember(rm.Edges.Member),
		Role: model.RoomRole(strings.ToUpper(string(rm.Role))), JoinedAt: rm.CreatedAt, ConversationID: room}
}

func toConversation(c *ent.Conversation) *model.Conversation {
	out := &model.Conversation{
		ID:              c.ID.String(),
		PublicKey:       c.PublicKey,
		Channel:         c.Channel,
		Title:           c.Title,
		Kind:            model.ConversationKind(strings.ToUpper(string(c.Kind))),
		AudienceVersion: c.AudienceVersion,
		Head:            c.NextSeq,
		CreatedAt:       c.CreatedAt,
		OwnerID:         c.OwnerID.String(),
	}
	if c.ActiveTurnID != nil {
		s := c.ActiveTurnID.String()
		out.ActiveTurnID = &s
	}
	return out
}

func toTurn(t *ent.Turn) *model.Turn {
	out := &model.Turn{
		ID:             t.ID.String(),
		ConversationID: t.ConversationID.String(),
		IdempotencyKey: t.IdempotencyKey,
		Position:       t.Position,
		State:          model.TurnState(strings.ToUpper(string(t.State))),
		Input:          t.Input,
		Answer:         t.Answer,
		Attempt:        int64(t.Attempt),
		TerminalReason: t.TerminalReason,
		CreatedAt:      t.CreatedAt,
		StartedAt:      t.StartedAt,
		FinishedAt:     t.FinishedAt,
		AuthorID:       t.AuthorID.String(),
		UsageJSON:      t.Usage,
	}
	if out.State != model.TurnStateQueued && out.State != model.TurnStateRunning {
		reason := ""
		if t.TerminalReason != nil {
			reason = *t.TerminalReason
		}
		out.Terminal = toTerminal(string(t.State), reason)
	}
	return out
}

// toUsage decodes a turn's settled usage column (outcome.Usage); nil while
// the turn has not ended.
func toUsage(raw json.RawMessage) (*model.Usage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var u outcome.Usage
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, fmt.Errorf("decode turn usage: %w", err)
	}
	return &model.Usage{
		InputTokens:  int64(u.InputTokens),
		OutputTokens: int64(u.OutputTokens),
		ModelCalls:   int64(u.ModelCalls),
		ToolCalls:    int64(u.ToolCalls),
	}, nil
}

func toSteerResult(c *ent.Command, t *model.Turn) *model.SteerResult {
	return &model.SteerResult{
		CommandID: c.ID.String(),
		State:     model.CommandState(strings.ToUpper(string(c.State))),
		Turn:      t,
	}
}

func toEntry(e journal.Entry) *model.JournalEntry {
	out := &model.JournalEntry{
		ID:             entryID(e),
		ConversationID: e.ConversationID.String(),
		Seq:            e.Seq,
		Kind:           model.JournalKind(strings.ToUpper(string(e.Kind))),
		Attempt:        int64(e.Attempt),
		Payload:        model.JSON(e.Payload),
		CreatedAt:      e.CreatedAt,
	}
	if e.TurnID.Valid {
		s := e.TurnID.UUID.String()
		out.TurnID = &s
	}
	if e.ActorID.Valid {
		s := e.ActorID.UUID.String()
		out.ActorID = &s
	}
	var p struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(e.Payload, &p) == nil {
		out.Text = p.Text
	}
	typed(out, e)
	return out
}

func toDelta(e journal.Entry) *model.AnswerDelta {
	var p journal.DeltaPayload
	_ = json.Unmarshal(e.Payload, &p)
	return &model.AnswerDelta{
		ID:      entryID(e),
		TurnID:  e.TurnID.UUID.String(),
		Seq:     e.Seq,
		Attempt: int64(e.Attempt),
		Offset:  int64(p.Offset),
		Text:    p.Text,
	}
}
