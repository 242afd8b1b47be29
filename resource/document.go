package resource

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/pg"
)

// Document is a document to add: its readers are lowercased verified
// emails.
type Document struct {
	Title   string
	Body    string
	Readers []string
}

// Passages splits a body into its searchable passages: paragraphs, with
// long ones cut at about maxPassage bytes on a word boundary. A paragraph
// that is only a Markdown heading (the document's `# title` line, a
// `## section`) opens the passage of the paragraph after it instead of
// being one: alone it would be a passage an answer cites for nothing (the
// title is shown beside every passage anyway), and its words still find
// the text below it. Every passage is a span of the body as written
// (line ends as \n).
func Passages(body string) []string {
	const maxPassage = 800
	body = strings.ReplaceAll(body, "\r\n", "\n")
	var out []string
	add := func(para string) {
		for len(para) > maxPassage {
			cut := strings.LastIndexByte(para[:maxPassage], ' ')
			if cut <= 0 {
				cut = maxPassage
			}
			out = append(out, strings.TrimSpace(para[:cut]))
			para = strings.TrimSpace(para[cut:])
		}
		if para != "" {
			out = append(out, para)
		}
	}
	heading, end := -1, 0 // where a run of headings began, waiting for its paragraph
	off := 0
	for _, raw := range strings.Split(body, "\n\n") {
		start := off + len(raw) - len(strings.TrimLeftFunc(raw, unicode.IsSpace))
		para := strings.TrimSpace(raw)
		off += len(raw) + len("\n\n")
		if para == "" {
			continue
		}
		end = start + len(para)
		if isHeading(para) {
			if heading < 0 {
				heading = start
			}
			continue
		}
		if heading >= 0 {
			start, heading = heading, -1
		}
		add(body[start:end])
	}
	if heading >= 0 { // headings with no text after them
		add(body[heading:end])
	}
	return out
}

// isHeading reports whether a paragraph is one Markdown ATX heading line:
// one to six #, then a space or nothing.
func isHeading(para string) bool {
	if strings.Contains(para, "\n") {
		return false
	}
	level := len(para) - len(strings.TrimLeft(para, "#"))
	return level >= 1 && level <= 6 && (len(para) == level || para[level] == ' ' || para[level] == '\t')
}

// Digest is the hex sha256 of a document's body, as citations carry it.
func Digest(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// AddDocument stores a document, its passages and its ACL. Call it inside
// a transaction to make the three one change.
func AddDocument(ctx context.Context, q pg.Querier, d Document) (uuid.UUID, error) {
	id := uuid.New()
	if _, err := q.ExecContext(ctx, `INSERT INTO documents (id, title, body, digest) VALUES ($1, $2, $3, $4)`,
		id, d.Title, d.Body, Digest(d.Body)); err != nil {
		return uuid.Nil, fmt.Errorf("add document: %w", err)
	}
	if err := writePassages(ctx, q, id, d.Body); err != nil {
		return uuid.Nil, err
	}
	if err := writeReaders(ctx, q, id, d.Readers); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

// writePassages chunks body into the document's passages.
func writePassages(ctx context.Context, q pg.Querier, id uuid.UUID, body string) error {
	for i, p := range Passages(body) {
		if _, err := q.ExecContext(ctx, `INSERT INTO passages (id, document_id, ordinal, text) VALUES ($1, $2, $3, $4)`,
			uuid.New(), id, i, p); err != nil {
			return fmt.Errorf("add passage: %w", err)
		}
	}
	return nil
}

// writeReaders adds readers (emails or group:<name>) to the document's ACL.
func writeReaders(ctx context.Context, q pg.Querier, id uuid.UUID, readers []string) error {
	for _, r := range readers {
		if _, err := q.ExecContext(ctx, `INSERT INTO document_acls (id, document_id, principal) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			uuid.New(), id, authority.Principal(r)); err != nil {
			return fmt.Errorf("add reader: %w", err)
		}
	}
	return nil
}

// ErrNoDocument is a document id that names no document.
var ErrNoDocument = errors.New("no such document")

// ReplaceDocument gives a document a new title and body: a new digest and
// new passages. Answers that cited it keep the digest they cited. Call it
// inside a transaction.
func ReplaceDocument(ctx context.Context, q pg.Querier, id uuid.UUID, title, body string) error {
	res, err := q.ExecContext(ctx, `UPDATE documents SET title = $2, body = $3, digest = $4 WHERE id = $1`, id, title, body, Digest(body))
	if err != nil {
		return fmt.Errorf("replace document: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoDocument
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM passages WHERE document_id = $1`, id); err != nil {
		return fmt.Errorf("replace passages: %w", err)
	}
	return writePassages(ctx, q, id, body)
}

// SetReaders makes readers the document's whole ACL. The next read of the
// document — a running turn's next tool call included — applies it. Call
// it inside a transaction.
func SetReaders(ctx context.Context, q pg.Querier, id uuid.UUID, readers []string) error {
	var locked uuid.UUID
	err := pg.QueryRow(ctx, q, `SELECT id FROM documents WHERE id = $1 FOR UPDATE`, []any{id}, &locked)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoDocument
	}
	if err != nil {
		return fmt.Errorf("set readers: %w", err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM document_acls WHERE document_id = $1`, id); err != nil {
		return fmt.Errorf("set readers: %w", err)
	}
	return writeReaders(ctx, q, id, readers)
}

// DeleteDocument removes a document, its passages and its ACL. Answers
// that cited it keep their citations (title, passage and digest). Call it
// inside a transaction.
func DeleteDocument(ctx context.Context, q pg.Querier, id uuid.UUID) error {
	for _, stmt := range []string{`DELETE FROM passages WHERE document_id = $1`, `DELETE FROM document_acls WHERE document_id = $1`} {
		if _, err := q.ExecContext(ctx, stmt, id); err != nil {
			return fmt.Errorf("delete document: %w", err)
		}
	}
	res, err := q.ExecContext(ctx, `DELETE FROM documents WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete document: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoDocument
	}
	return nil
}

// A document is listed when its ACL grants the viewer ($1, a principal)
// read access now.
var documentACL = authority.DocumentReadableSQL("d.id", "$1")

var listDocuments = `
SELECT d.id, d.title, d.digest FROM documents d
WHERE ` + documentACL + `
ORDER BY d.title, d.id
LIMIT $2 OFFSET $3`

// searchDocuments ranks a document by its best-matching passage.
var searchDocuments = `
SELECT d.id, d.title, d.digest
FROM documents d
JOIN LATERAL (
  SELECT max(ts_rank(p.tsv, q)) AS rank
  FROM passages p, websearch_to_tsquery('english', $4) q
  WHERE p.document_id = d.id AND p.tsv @@ q
) m ON m.rank IS NOT NULL
WHERE ` + documentACL + `
ORDER BY m.rank DESC, d.title, d.id
LIMIT $2 OFFSET $3`

// DocumentRef is a document as a listing shows it.
type DocumentRef struct {
	ID     uuid.UUID
	Title  string
	Digest string
}

// ListDocuments lists up to first documents principal (an
// authority.Principal) may read now, by title, or ranked by a full-text
// query over their passages when query is not blank, skipping the first
// offset of that order.
func ListDocuments(ctx context.Context, q pg.Querier, principal, query string, first, offset int) ([]DocumentRef, error) {
	sqlText, args := listDocuments, []any{principal, first, offset}
	if strings.TrimSpace(query) != "" {
		sqlText, args = searchDocuments, append(args, query)
	}
	rows, err := q.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	defer rows.Close()
	out := []DocumentRef{}
	for rows.Next() {
		var d DocumentRef
		if err := rows.Scan(&d.ID, &d.Title, &d.Digest); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
