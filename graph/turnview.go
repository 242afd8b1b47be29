package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entturn "github.com/turngate/turngate/ent/turn"
	"github.com/turngate/turngate/feed"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/journal"
)

// turnFor is t as viewer reads it now (feed): a finished turn whose
// answer is withheld from them reads the withheld notice and ended
// audience_withheld. Every resolver that answers a turn builds it here.
func (r *Resolver) turnFor(ctx context.Context, viewer authority.Member, t *ent.Turn) (*model.Turn, error) {
	out := toTurn(t)
	if t.Answer == nil && t.State != entturn.StateCompleted {
		return out, nil // nothing of it derives from evidence yet
	}
	rd, err := r.Feed.Read(ctx, viewer, t.ConversationID, t.ID, nil)
	if err != nil {
		return nil, err
	}
	out.Answer = rd.Answer(t.Answer)
	out.TerminalReason = rd.TerminalReason(string(t.State), t.TerminalReason)
	if out.Terminal != nil && out.TerminalReason != nil {
		out.Terminal = toTerminal(string(t.State), *out.TerminalReason)
	}
	return out, nil
}

// readTurn is how the current viewer reads obj now, with the citations
// of its answer (the zero payload when it has none).
func (r *Resolver) readTurn(ctx context.Context, obj *model.Turn) (authority.Member, feed.Turn, journal.AnswerPayload, error) {
	m, err := r.Members.Current(ctx)
	if err != nil {
		return m, feed.Turn{}, journal.AnswerPayload{}, err
	}
	p, err := answerOf(ctx, r.Turns, obj)
	if err != nil {
		return m, feed.Turn{}, p, err
	}
	rd, err := r.Feed.Read(ctx, m, uuid.MustParse(obj.ConversationID), uuid.MustParse(obj.ID), p.Citations)
	return m, rd, p, err
}
