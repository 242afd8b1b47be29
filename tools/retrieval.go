package tools

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/pg"
)

// Retrieval searches the documents the member may read — their ACL holds
// the member's email now, and the turn's manifest pins them — by Postgres
// full-text search, and returns ranked passages with citation ids.
type Retrieval struct{}

// RetrievalName is the tool's name.
const RetrievalName = "retrieval"

// Spec implements Tool.
func (Retrieval) Spec() Spec {
	return Spec{
		Name:        RetrievalName,
		Description: "Search the documents the member may read. Returns ranked passages, each with a citation id to cite as [id].",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},"limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query"]}`),
	}
}

// Permission implements Tool.
func (Retrieval) Permission() string { return authority.PermissionDocumentsRead }

// visible is the condition a document must meet for the actor: the ACL
// names one of the actor's principals ($1: the email and its groups, read
// just before) and the manifest pins it — the listed documents
// ($2) when there is a selection, else those that existed when the turn
// was accepted ($3) — and, in a shared room ($4), every member of the room
// may read it now.
var visible = authority.DocumentReadableByAnySQL("d.id", "$1::text[]") + `
  AND ($2::uuid[] IS NULL OR d.id = ANY($2))
  AND ($3::timestamptz IS NULL OR d.created_at <= $3)
  AND ($4::uuid IS NULL OR ` + authority.AudienceReadableSQL("d.id", "$4") + `)`

var searchPassages = `
SELECT p.document_id, p.ordinal, d.title, d.digest, p.text
FROM passages p JOIN documents d ON d.id = p.document_id,
     websearch_to_tsquery('english', $5) q
WHERE p.tsv @@ q AND ` + visible + `
ORDER BY ts_rank(p.tsv, q) DESC, p.document_id, p.ordinal
LIMIT $6`

// manifestArgs are the visibility arguments $1–$4 for an actor, its
// principals read now.
func manifestArgs(ctx context.Context, db pg.Querier, a Actor) ([]any, error) {
	principals, err := authority.Principals(ctx, db, authority.Principal(a.Email))
	if err != nil {
		return nil, err
	}
	var docs any // NULL: no explicit selection, so the cut-off decides
	if len(a.Manifest.Documents) > 0 {
		ids := make([]string, len(a.Manifest.Documents))
		for i, id := range a.Manifest.Documents {
			ids[i] = id.String()
		}
		docs = pq.StringArray(ids)
	}
	var before any
	if a.Manifest.DocumentsBefore != nil {
		before = *a.Manifest.DocumentsBefore
	}
	return []any{pq.StringArray(principals), docs, before, a.audience()}, nil
}

// Run implements Tool.
func (Retrieval) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(args.Query) == "" {
		return Result{}, fmt.Errorf("%w: query is empty", ErrBadArguments)
	}
	if args.Limit <= 0 || args.Limit > 10 {
		args.Limit = 5
	}
	// Any of the words may match; the best matches rank first.
	query := strings.Join(strings.FieldsFunc(args.Query, notWordRune), " or ")
	margs, err := manifestArgs(ctx, call.DB, call.Actor)
	if err != nil {
		return Result{}, fmt.Errorf("retrieval: %w", err)
	}
	rows, err := call.DB.QueryContext(ctx, searchPassages, append(margs, query, args.Limit)...)
	if err != nil {
		return Result{}, fmt.Errorf("retrieval: %w", err)
	}
	defer rows.Close()
	var res Result
	var b strings.Builder
	for rows.Next() {
		var doc uuid.UUID
		var ordinal int
		var title, digest, text string
		if err := rows.Scan(&doc, &ordinal, &title, &digest, &text); err != nil {
			return Result{}, err
		}
		cite := fmt.Sprintf("doc:%s#p%d", doc, ordinal)
		res.Citations = append(res.Citations, Citation{ID: cite, Source: title, Passage: text, Document: doc, Digest: digest})
		res.addDocument(doc)
		fmt.Fprintf(&b, "[%s] (%s) %s\n", cite, title, oneLine(text))
	}
	if err := rows.Err(); err != nil {
		return Result{}, err
	}
	if len(res.Citations) == 0 {
		res.Content = "No document the member may read matches."
		return res, nil
	}
	res.Content = b.String()
	return res, nil
}

// ReadDocument reads one document the member may read, whole.
type ReadDocument struct{}

// ReadDocumentName is the tool's name.
const ReadDocumentName = "read_document"

// Spec implements Tool.
func (ReadDocument) Spec() Spec {
	return Spec{
		Name:        ReadDocumentName,
		Description: "Read one document the member may read, by its id (a uuid, or a doc: citation id).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
	}
}

// Permission implements Tool.
func (ReadDocument) Permission() string { return authority.PermissionDocumentsRead }

var readDocument = `
SELECT d.title, d.digest, d.body FROM documents d WHERE d.id = $5 AND ` + visible

// Run implements Tool.
func (ReadDocument) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		ID string `json:"id"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	raw := strings.TrimPrefix(strings.Trim(args.ID, "[] "), "doc:")
	raw, _, _ = strings.Cut(raw, "#")
	id, err := uuid.Parse(raw)
	if err != nil {
		return Result{}, fmt.Errorf("%w: id is not a document id", ErrBadArguments)
	}
	var title, digest, body string
	margs, err := manifestArgs(ctx, call.DB, call.Actor)
	if err != nil {
		return Result{}, fmt.Errorf("read document: %w", err)
	}
	err = pg.QueryRow(ctx, call.DB, readDocument, append(margs, id), &title, &digest, &body)
	if errors.Is(err, sql.ErrNoRows) {
		// A document the member may not read reads as one that does not
		// exist.
		return Result{}, &Refusal{Status: "not_found", Message: "No document with that id is available to the member in this turn."}
	}
	if err != nil {
		return Result{}, fmt.Errorf("read document: %w", err)
	}
	cite := "doc:" + id.String()
	return Result{
		Content:   fmt.Sprintf("[%s] (%s)\n%s", cite, title, body),
		Citations: []Citation{{ID: cite, Source: title, Passage: clip(oneLine(body), 300), Document: id, Digest: digest}},
		Documents: []uuid.UUID{id},
	}, nil
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }
