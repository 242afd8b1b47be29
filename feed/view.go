package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/pg"
)

// view is what some of a room's turns and documents look like to the
// room's current members (or to one of them) at one moment. Immutable
// once computed: the shared tail hands one view to every follower.
type view struct {
	// at is when the statement that computed it began: it saw the
	// database as of then or later.
	at time.Time
	// members are the members it was computed for, each a current member
	// of the room then.
	members map[uuid.UUID]bool
	// turns are the turns it was computed for; evidence their evidence.
	turns    map[uuid.UUID]bool
	evidence map[uuid.UUID][]uuid.UUID
	// audienceWithheld are the turns whose answer was withheld from the
	// room's whole audience at publication.
	audienceWithheld map[uuid.UUID]bool
	// docs are the documents it was computed for; unreadable, for each
	// member, those they may not read now.
	docs       map[uuid.UUID]bool
	unreadable map[uuid.UUID]map[uuid.UUID]bool
}

// everyone is the view of nothing: no turn, no document. It withholds
// nothing, because there is nothing it was asked about, and it covers
// every viewer.
var everyone = &view{}

// covers reports whether v may stand for member's view of its turns and
// documents for a reader that started at since: it was computed after
// the reader started, and for member.
func (v *view) covers(member uuid.UUID, since time.Time) bool {
	if v == everyone {
		return true
	}
	return !v.at.Before(since) && v.members[member]
}

// withheld reports whether turn is withheld from member: withheld from
// the whole audience, or drawing on a document member may not read now.
// A turn the view was not computed for is withheld (fail closed).
func (v *view) withheld(member, turn uuid.UUID) bool {
	if !v.turns[turn] {
		return true
	}
	if v.audienceWithheld[turn] {
		return true
	}
	if !v.members[member] {
		return true
	}
	for _, d := range v.evidence[turn] {
		if v.unreadable[member][d] {
			return true
		}
	}
	return false
}

// readable reports whether member may read doc now. A document the view
// was not computed for is not readable (fail closed).
func (v *view) readable(member, doc uuid.UUID) bool {
	return v.docs[doc] && v.members[member] && !v.unreadable[member][doc]
}

// viewQuery computes a view in one statement: $1 the room, $2 its turns,
// $3 further documents (cited ones), $4 the members to compute it for
// (those of them who are current members of the room), or NULL for every
// current member. Rows: ('e', turn, document) evidence, ('w', turn, NULL)
// withheld from the audience, ('m', member, NULL) a member computed for,
// ('u', member, document) a document that member may not read now.
var viewQuery = `
WITH ev AS (
  SELECT turn_id, document_id FROM turn_evidence WHERE conversation_id = $1 AND turn_id = ANY($2::uuid[])),
docs AS (SELECT document_id AS d FROM ev UNION SELECT unnest($3::uuid[])),
mem AS (
  SELECT member_id FROM room_members WHERE conversation_id = $1 AND ($4::uuid[] IS NULL OR member_id = ANY($4::uuid[])))
SELECT 'e', turn_id, document_id FROM ev
UNION ALL
SELECT 'w', id, NULL FROM turns WHERE conversation_id = $1 AND id = ANY($2::uuid[]) AND terminal_reason = '` + outcome.ReasonAudienceWithheld + `'
UNION ALL
SELECT 'm', member_id, NULL FROM mem
UNION ALL
SELECT 'u', mem.member_id, docs.d FROM mem, docs WHERE NOT ` + authority.MemberReadsDocumentSQL("docs.d", "mem.member_id")

// compute reads the view of turns and docs in room for members, or for
// every current member when members is nil.
func compute(ctx context.Context, q pg.Querier, room uuid.UUID, turns, docs, members []uuid.UUID) (*view, error) {
	if len(turns) == 0 && len(docs) == 0 {
		return everyone, nil
	}
	v := &view{at: time.Now(), members: map[uuid.UUID]bool{}, turns: map[uuid.UUID]bool{},
		evidence: map[uuid.UUID][]uuid.UUID{}, audienceWithheld: map[uuid.UUID]bool{},
		docs: map[uuid.UUID]bool{}, unreadable: map[uuid.UUID]map[uuid.UUID]bool{}}
	for _, t := range turns {
		v.turns[t] = true
	}
	var only any
	if members != nil {
		only = uuidArray(members)
	}
	rows, err := q.QueryContext(ctx, viewQuery, room, uuidArray(turns), uuidArray(docs), only)
	if err != nil {
		return nil, fmt.Errorf("view of room %s: %w", room, err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var a uuid.UUID
		var b uuid.NullUUID
		if err := rows.Scan(&kind, &a, &b); err != nil {
			return nil, fmt.Errorf("view of room %s: %w", room, err)
		}
		switch kind {
		case "e":
			v.evidence[a] = append(v.evidence[a], b.UUID)
			v.docs[b.UUID] = true
		case "w":
			v.audienceWithheld[a] = true
		case "m":
			v.members[a] = true
		case "u":
			if v.unreadable[a] == nil {
				v.unreadable[a] = map[uuid.UUID]bool{}
			}
			v.unreadable[a][b.UUID] = true
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		return nil, fmt.Errorf("view of room %s: %w", room, err)
	}
	for _, d := range docs {
		v.docs[d] = true
	}
	return v, nil
}

func uuidArray(ids []uuid.UUID) string {
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	return "{" + strings.Join(strs, ",") + "}"
}

// subjects are the turns and the cited documents of entries: what a view
// of them must be computed for.
func subjects(entries []journal.Entry) (turns, docs []uuid.UUID, err error) {
	for _, e := range entries {
		t, d, err := subjectsOf(e)
		if err != nil {
			return nil, nil, err
		}
		if t != uuid.Nil && !slices.Contains(turns, t) {
			turns = append(turns, t)
		}
		for _, id := range d {
			if !slices.Contains(docs, id) {
				docs = append(docs, id)
			}
		}
	}
	return turns, docs, nil
}

// subjectsOf is the turn whose text an entry carries (uuid.Nil for an
// entry that carries nothing derived from evidence) and the documents it
// cites.
func subjectsOf(e journal.Entry) (uuid.UUID, []uuid.UUID, error) {
	if !e.TurnID.Valid {
		return uuid.Nil, nil, nil
	}
	switch e.Kind {
	case journal.KindAnswerDelta, journal.KindToolRequested, journal.KindApprovalRequested, journal.KindTurnTerminal:
		return e.TurnID.UUID, nil, nil
	case journal.KindTurnAnswer:
		var p journal.AnswerPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return uuid.Nil, nil, fmt.Errorf("decode the answer entry %d: %w", e.Seq, err)
		}
		return e.TurnID.UUID, answerDocuments(p.Citations), nil
	case journal.KindToolCompleted:
		var p journal.ToolCompletedPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return uuid.Nil, nil, fmt.Errorf("decode the tool entry %d: %w", e.Seq, err)
		}
		var docs []uuid.UUID
		for _, c := range p.Citations {
			if id := citedDocument(c); id != uuid.Nil {
				docs = append(docs, id)
			}
		}
		return uuid.Nil, docs, nil
	}
	return uuid.Nil, nil, nil
}

func answerDocuments(cs []journal.AnswerCitation) []uuid.UUID {
	var docs []uuid.UUID
	for _, c := range cs {
		if c.Document != uuid.Nil {
			docs = append(docs, c.Document)
		}
	}
	return docs
}

// citedDocument is the document of a citation id ("doc:<id>#p<n>"), or
// uuid.Nil for a citation of no document (conversation history).
func citedDocument(cite string) uuid.UUID {
	raw, ok := strings.CutPrefix(cite, "doc:")
	if !ok {
		return uuid.Nil
	}
	raw, _, _ = strings.Cut(raw, "#")
	id, _ := uuid.Parse(raw)
	return id
}

// project is e as member reads it through v (see the package doc), and
// whether that differs from the entry as stored.
func (v *view) project(member uuid.UUID, e journal.Entry) (journal.Entry, bool, error) {
	turn, _, err := subjectsOf(e)
	if err != nil {
		return e, false, err
	}
	withheld := turn != uuid.Nil && v.withheld(member, turn)
	switch e.Kind {
	case journal.KindAnswerDelta:
		if !withheld {
			return e, false, nil
		}
		var p journal.DeltaPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return e, false, fmt.Errorf("decode the delta entry %d: %w", e.Seq, err)
		}
		if p.Text == "" {
			return e, false, nil
		}
		p.Text = ""
		return withPayload(e, p)
	case journal.KindToolRequested:
		if !withheld {
			return e, false, nil
		}
		var p journal.ToolRequestedPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return e, false, fmt.Errorf("decode the tool entry %d: %w", e.Seq, err)
		}
		p.Arguments = "{}"
		return withPayload(e, p)
	case journal.KindApprovalRequested:
		if !withheld {
			return e, false, nil
		}
		var p journal.ApprovalRequestedPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return e, false, fmt.Errorf("decode the approval entry %d: %w", e.Seq, err)
		}
		p.Arguments = "{}"
		return withPayload(e, p)
	case journal.KindTurnTerminal:
		if !withheld {
			return e, false, nil
		}
		var p journal.TerminalPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return e, false, fmt.Errorf("decode the terminal entry %d: %w", e.Seq, err)
		}
		if p.Outcome != "completed" || p.Reason == outcome.ReasonAudienceWithheld {
			return e, false, nil
		}
		p.Reason = outcome.ReasonAudienceWithheld
		return withPayload(e, p)
	case journal.KindTurnAnswer:
		var p journal.AnswerPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return e, false, fmt.Errorf("decode the answer entry %d: %w", e.Seq, err)
		}
		kept := v.citations(member, p.Citations)
		if !withheld && len(kept) == len(p.Citations) {
			return e, false, nil
		}
		if withheld && !v.audienceWithheld[turn] {
			p.Text, p.Artifacts = outcome.WithheldAnswer, []journal.AnswerArtifact{}
		}
		p.Citations = kept
		return withPayload(e, p)
	case journal.KindToolCompleted:
		var p journal.ToolCompletedPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return e, false, fmt.Errorf("decode the tool entry %d: %w", e.Seq, err)
		}
		kept := p.Citations[:0:0]
		for _, c := range p.Citations {
			if id := citedDocument(c); id == uuid.Nil || v.readable(member, id) {
				kept = append(kept, c)
			}
		}
		if len(kept) == len(p.Citations) {
			return e, false, nil
		}
		p.Citations = kept
		return withPayload(e, p)
	}
	return e, false, nil
}

// citations keeps the citations member may read: one of a document they
// may not read now is dropped, passage, title and digest with it;
// citations of no document (conversation history) stay.
func (v *view) citations(member uuid.UUID, cs []journal.AnswerCitation) []journal.AnswerCitation {
	out := make([]journal.AnswerCitation, 0, len(cs))
	for _, c := range cs {
		if c.Document == uuid.Nil || v.readable(member, c.Document) {
			out = append(out, c)
		}
	}
	return out
}

// withPayload is e carrying payload p instead, reported as changed.
func withPayload(e journal.Entry, p any) (journal.Entry, bool, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return e, false, err
	}
	e.Payload = raw
	return e, true, nil
}
