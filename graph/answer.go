package graph

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/turn"
)

// A turn's answer as the contract shows it: its text's payload, its
// citations and the artifacts it publishes.

// answerOf reads the payload of a turn's turn_answer entry; the zero
// payload when the turn has none (it has not answered, or its answer was
// refused).
func answerOf(ctx context.Context, turns *turn.Service, t *model.Turn) (journal.AnswerPayload, error) {
	if t.Answer == nil {
		return journal.AnswerPayload{}, nil // no answer, so no turn_answer entry
	}
	id, err := uuid.Parse(t.ID)
	if err != nil {
		return journal.AnswerPayload{}, fmt.Errorf("turn id %q: %w", t.ID, err)
	}
	return turns.Answer(ctx, id)
}

func toCitations(turnID string, cs []journal.AnswerCitation) []*model.Citation {
	out := make([]*model.Citation, len(cs))
	for i, c := range cs {
		mc := &model.Citation{ID: turnID + "/" + c.ID, Ref: c.ID, Source: c.Source, Passage: c.Passage}
		if c.Document != uuid.Nil {
			s := c.Document.String()
			mc.DocumentID = &s
		}
		if c.Digest != "" {
			d := c.Digest
			mc.Digest = &d
		}
		out[i] = mc
	}
	return out
}

func toAnswerArtifacts(turnID string, as []journal.AnswerArtifact) []*model.AnswerArtifact {
	out := make([]*model.AnswerArtifact, len(as))
	for i, a := range as {
		ma := &model.AnswerArtifact{
			ID:          turnID + "/" + a.ArtifactID.String(),
			ArtifactID:  a.ArtifactID.String(),
			Name:        a.Name,
			MediaType:   a.MediaType,
			Size:        a.Size,
			Sha256:      a.SHA256,
			DownloadURL: ArtifactPath(a.ArtifactID),
		}
		if a.ResourceID != uuid.Nil {
			s := a.ResourceID.String()
			ma.ResourceID = &s
		}
		out[i] = ma
	}
	return out
}
