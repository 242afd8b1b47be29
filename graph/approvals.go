package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	entapproval "github.com/turngate/turngate/ent/approval"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/turn"
)

// decideApprovalInput is decideApproval's input as validated.
type decideApprovalInput struct {
	ApprovalID string `json:"approvalId" validate:"uuid"`
	Decision   string `json:"decision" validate:"oneof=APPROVE REJECT"`
}

// decisions maps the contract's decisions to the service's.
var decisions = map[model.ApprovalDecision]string{
	model.ApprovalDecisionApprove: turn.DecisionApprove,
	model.ApprovalDecisionReject:  turn.DecisionReject,
}

// argumentRedactor redacts an approval's arguments as the runner redacts
// them in its approval_requested entry (its default patterns), so the
// approval shows a member no more than the journal does.
var argumentRedactor = func() *guard.Redactor {
	r, err := guard.NewRedactor(guard.DefaultPatterns())
	if err != nil {
		panic(err)
	}
	return r
}()

// redactArguments redacts every string of a JSON value, keeping it JSON.
func redactArguments(raw json.RawMessage) model.JSON {
	return model.JSON(argumentRedactor.RedactJSON(raw))
}

// approvalState is the contract's state of a stored approval: a pending
// one whose time has run out is EXPIRED — deciding it is a CONFLICT, and
// its effect never runs — even before its run records the expiry.
func approvalState(state string, expiresAt, now time.Time) model.ApprovalState {
	if state == string(entapproval.StatePending) && !now.Before(expiresAt) {
		return model.ApprovalStateExpired
	}
	return model.ApprovalState(strings.ToUpper(state))
}

func toApproval(a *turn.ApprovalState) *model.Approval {
	return &model.Approval{
		ID:        a.ID.String(),
		TurnID:    a.TurnID.String(),
		Tool:      a.Tool,
		Arguments: redactArguments(a.Arguments),
		State:     approvalState(a.State, a.ExpiresAt, time.Now()),
		ExpiresAt: a.ExpiresAt,
		Executed:  a.Executed,
	}
}

func toEntApproval(a *ent.Approval, now time.Time) *model.Approval {
	return &model.Approval{
		ID:        a.ID.String(),
		TurnID:    a.TurnID.String(),
		Tool:      a.Tool,
		Arguments: redactArguments(a.Arguments),
		State:     approvalState(string(a.State), a.ExpiresAt, now),
		ExpiresAt: a.ExpiresAt,
		Executed:  a.ExecutedAt != nil,
	}
}

// turnApprovals lists a turn's approvals, oldest first.
func turnApprovals(ctx context.Context, turns *turn.Service, turnID uuid.UUID) ([]*model.Approval, error) {
	as, err := turns.Approvals(ctx, turnID)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]*model.Approval, len(as))
	for i, a := range as {
		out[i] = toEntApproval(a, now)
	}
	return out, nil
}

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

// citationsFor keeps the citations viewer may read now: one of a document
// the viewer may not read (a member who joined since, or lost the ACL)
// is dropped, passage, title and digest with it. Citations of no document
// (conversation history) stay.
func citationsFor(ctx context.Context, store *resource.Store, viewer authority.Member, cs []journal.AnswerCitation) ([]journal.AnswerCitation, error) {
	var docs []uuid.UUID
	for _, c := range cs {
		if c.Document != uuid.Nil {
			docs = append(docs, c.Document)
		}
	}
	if len(docs) == 0 {
		return cs, nil
	}
	readable, err := store.Readable(ctx, viewer, docs)
	if err != nil {
		return nil, err
	}
	out := make([]journal.AnswerCitation, 0, len(cs))
	for _, c := range cs {
		if c.Document == uuid.Nil || readable[c.Document] {
			out = append(out, c)
		}
	}
	return out, nil
}

// entryFor is a journal entry as viewer may read it: a turn_answer's
// citations are filtered per viewer (citationsFor), and so are the
// citation ids of a tool_completed entry; other entries name no document.
func entryFor(ctx context.Context, store *resource.Store, viewer authority.Member, e journal.Entry) (journal.Entry, error) {
	if e.Kind == journal.KindToolCompleted {
		return toolEntryFor(ctx, store, viewer, e)
	}
	if e.Kind != journal.KindTurnAnswer {
		return e, nil
	}
	var p journal.AnswerPayload
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return e, fmt.Errorf("decode the answer entry %d: %w", e.Seq, err)
	}
	kept, err := citationsFor(ctx, store, viewer, p.Citations)
	if err != nil || len(kept) == len(p.Citations) {
		return e, err
	}
	p.Citations = kept
	return withPayload(e, p)
}

// withPayload is e carrying payload p instead.
func withPayload(e journal.Entry, p any) (journal.Entry, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return e, err
	}
	e.Payload = raw
	return e, nil
}

// blankWithheld empties the text of the answer deltas of turns whose
// answer was withheld from the room's audience (a member joined who may
// not read what it drew on): read later, from the journal or as tokens,
// they carry nothing of it. The entries keep their positions, so a reader
// resuming from a position neither skips nor repeats one.
func blankWithheld(ctx context.Context, turns *turn.Service, entries []journal.Entry) ([]journal.Entry, error) {
	var ids []uuid.UUID
	for _, e := range entries {
		if e.Kind == journal.KindAnswerDelta && e.TurnID.Valid {
			ids = append(ids, e.TurnID.UUID)
		}
	}
	if len(ids) == 0 {
		return entries, nil
	}
	withheld, err := turns.Withheld(ctx, ids)
	if err != nil || len(withheld) == 0 {
		return entries, err
	}
	for i, e := range entries {
		if e.Kind != journal.KindAnswerDelta || !withheld[e.TurnID.UUID] {
			continue
		}
		var p journal.DeltaPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return nil, fmt.Errorf("decode the delta entry %d: %w", e.Seq, err)
		}
		p.Text = ""
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		entries[i].Payload = raw
	}
	return entries, nil
}

// toolEntryFor drops from a tool_completed entry the citation ids
// ("doc:<id>#p<n>") of documents viewer may not read now: an entry does
// not say that such a document matched.
func toolEntryFor(ctx context.Context, store *resource.Store, viewer authority.Member, e journal.Entry) (journal.Entry, error) {
	var p journal.ToolCompletedPayload
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return e, fmt.Errorf("decode the tool entry %d: %w", e.Seq, err)
	}
	docOf := func(cite string) uuid.UUID {
		raw, ok := strings.CutPrefix(cite, "doc:")
		if !ok {
			return uuid.Nil
		}
		raw, _, _ = strings.Cut(raw, "#")
		id, _ := uuid.Parse(raw)
		return id
	}
	var docs []uuid.UUID
	for _, c := range p.Citations {
		if id := docOf(c); id != uuid.Nil {
			docs = append(docs, id)
		}
	}
	if len(docs) == 0 {
		return e, nil
	}
	readable, err := store.Readable(ctx, viewer, docs)
	if err != nil {
		return e, err
	}
	kept := p.Citations[:0:0]
	for _, c := range p.Citations {
		if id := docOf(c); id == uuid.Nil || readable[id] {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(p.Citations) {
		return e, nil
	}
	p.Citations = kept
	return withPayload(e, p)
}
