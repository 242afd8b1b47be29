package graph

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/resource"
)

// MaxArtifactText bounds the artifacts whose content Artifact.text
// carries, in bytes.
const MaxArtifactText = 64 << 10

// ArtifactPath is where an artifact's content is downloaded.
func ArtifactPath(id uuid.UUID) string { return "/artifacts/" + id.String() }

func toArtifact(ref resource.ArtifactRef) *model.Artifact {
	return &model.Artifact{
		ID:          ref.ID.String(),
		Name:        ref.Name,
		MediaType:   ref.MediaType,
		Size:        ref.Size,
		SHA256:      ref.SHA256,
		DownloadURL: ArtifactPath(ref.ID),
	}
}

// artifactError maps an artifact read's failure to what a client sees:
// one not visible is the same NOT_FOUND as one that does not exist, and
// content that fails its digest check is refused, not shown.
func artifactError(err error) error {
	switch {
	case errors.Is(err, resource.ErrArtifactNotFound):
		return errcode.New(errcode.NotFound, "artifact not found")
	case errors.Is(err, resource.ErrDigestMismatch):
		return errcode.New(errcode.Conflict, "the artifact failed its digest check; its content is not served")
	}
	return err
}

// isTextMedia reports whether a media type is text a client may be
// shown inline: text/* or application/json.
func isTextMedia(mediaType string) bool {
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}

// artifactText is an artifact's content as text, read (re-authorised and
// digest-verified) for viewer; nil when it is not a text artifact or is
// too big.
func artifactText(ctx context.Context, store *resource.Store, viewer uuid.UUID, a *model.Artifact) (*string, error) {
	if !isTextMedia(a.MediaType) || a.Size > MaxArtifactText {
		return nil, nil
	}
	id, err := uuid.Parse(a.ID)
	if err != nil {
		return nil, fmt.Errorf("artifact id %q: %w", a.ID, err)
	}
	ref, data, err := store.Read(ctx, viewer, id)
	if err != nil {
		return nil, artifactError(err)
	}
	if ref.Size > MaxArtifactText || !utf8.Valid(data) {
		return nil, nil
	}
	s := string(data)
	return &s, nil
}

// documentsInput is documents' arguments as validated.
type documentsInput struct {
	First int64  `json:"first" validate:"min=1,max=100"`
	Query string `json:"query" validate:"maxbytes=500"`
}

// documentsArgs validates the arguments documents and documentsConnection
// share: first defaults to 20.
func documentsArgs(first *int64, query *string) (documentsInput, error) {
	in := documentsInput{First: 20}
	if first != nil {
		in.First = *first
	}
	if query != nil {
		in.Query = *query
	}
	return in, check(in)
}

// MaxDocumentOffset bounds how deep documentsConnection pages: a cursor
// past it is BAD_USER_INPUT (offset paging costs the skipped rows).
const MaxDocumentOffset = 10000

// offsetCursor is the opaque cursor of the item at offset (0-based) in a
// listing of kind's order.
func offsetCursor(kind string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strconv.Itoa(offset)))
}

// cursorOffset is where the page after cursor starts; only a cursor
// offsetCursor made for kind, within MaxDocumentOffset, is accepted.
func cursorOffset(kind, cursor string) (int, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	n, ok := strings.CutPrefix(string(raw), kind+":")
	at, aerr := strconv.Atoi(n)
	if err != nil || !ok || aerr != nil || at < 0 || at >= MaxDocumentOffset || offsetCursor(kind, at) != cursor {
		return 0, errcode.Invalid("after", "malformed cursor")
	}
	return at + 1, nil
}

// documentCursor and documentOffset are documentsConnection's cursors.
func documentCursor(offset int) string { return offsetCursor("docs", offset) }

func documentOffset(cursor string) (int, error) { return cursorOffset("docs", cursor) }

// documentPage is a documentsConnection page: first documents from
// offset, and whether more follow (one more row is read to tell).
func documentPage(ctx context.Context, store *resource.Store, viewer authority.Member, query string, first, offset int) (*model.DocumentConnection, error) {
	docs, err := documentsFor(ctx, store, viewer, query, first+1, offset)
	if err != nil {
		return nil, err
	}
	more := len(docs) > first
	if more {
		docs = docs[:first]
	}
	conn := &model.DocumentConnection{Edges: make([]*model.DocumentEdge, len(docs)), PageInfo: &model.PageInfo{
		HasNextPage: more && offset+first < MaxDocumentOffset, HasPreviousPage: offset > 0,
	}}
	for i, d := range docs {
		conn.Edges[i] = &model.DocumentEdge{Cursor: documentCursor(offset + i), Node: d}
	}
	if n := len(docs); n > 0 {
		conn.PageInfo.StartCursor, conn.PageInfo.EndCursor = &conn.Edges[0].Cursor, &conn.Edges[n-1].Cursor
	}
	return conn, nil
}

// documentsFor lists up to first documents viewer may read now, filtered
// by a full-text query over their passages when query is not blank, from
// offset in that order.
func documentsFor(ctx context.Context, store *resource.Store, viewer authority.Member, query string, first, offset int) ([]*model.Document, error) {
	docs, err := store.Documents(ctx, viewer, query, first, offset)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Document, len(docs))
	for i, d := range docs {
		out[i] = &model.Document{ID: d.ID.String(), Title: d.Title, Digest: d.Digest}
	}
	return out, nil
}
