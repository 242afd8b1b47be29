package resource

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/sandbox"
)

// MaxArtifactBytes bounds one artifact's content.
const MaxArtifactBytes = 1 << 20

// MaxArtifactName is the longest artifact name, in bytes: the sandbox's.
const MaxArtifactName = sandbox.MaxNameLen

// maxMediaType bounds a media type's length.
const maxMediaType = 127

var (
	// ErrInvalid: an artifact's name or media type is not one it may
	// have. The message says which and why.
	ErrInvalid = errors.New("invalid artifact")
	// ErrTooLarge: content over MaxArtifactBytes.
	ErrTooLarge = errors.New("artifact too large")
	// ErrArtifactNotFound: no artifact with that id is visible to the
	// viewer. An artifact the viewer may not read reads exactly like one
	// that does not exist.
	ErrArtifactNotFound = errors.New("artifact not found")
	// ErrDigestMismatch: an artifact's content does not match its stored
	// sha256, or a room reference's digest does not match the artifact.
	// No bytes are returned.
	ErrDigestMismatch = errors.New("artifact digest mismatch")
)

// ValidArtifactName reports whether name is a plain file name: 1–128
// characters of [A-Za-z0-9._-], not starting with a dot. It is the
// sandbox's file-name rule (sandbox.ValidName), so every artifact can be a
// script input.
func ValidArtifactName(name string) bool { return sandbox.ValidName(name) }

// MediaTypeFor is the media type of an artifact named name, by its
// extension: .json, .csv and .md have their own, anything else is
// text/plain.
func MediaTypeFor(name string) string {
	switch lower := strings.ToLower(name); {
	case strings.HasSuffix(lower, ".json"):
		return "application/json"
	case strings.HasSuffix(lower, ".csv"):
		return "text/csv"
	case strings.HasSuffix(lower, ".md"):
		return "text/markdown"
	default:
		return "text/plain"
	}
}

// ArtifactRef names an artifact: an owner record of a member's. In a
// shared room the backend turns one a tool made into a room resource
// reference when the tool settles (LinkToRoom).
type ArtifactRef struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	MediaType string    `json:"mediaType"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
}

// clip shortens s to at most n characters for an error message.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// sha256Hex is the lowercase hex sha256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CreateArtifact stores content as an artifact owned by owner, made in
// turn (uuid.Nil for none), with its sha256. The name must be a plain file
// name (ValidArtifactName); an empty media type is chosen from the name
// (MediaTypeFor). Bad names or media types are ErrInvalid; content over
// MaxArtifactBytes is ErrTooLarge.
func CreateArtifact(ctx context.Context, q pg.Querier, owner uuid.UUID, turn uuid.UUID, name, mediaType string, content []byte) (ArtifactRef, error) {
	if !ValidArtifactName(name) {
		return ArtifactRef{}, fmt.Errorf("%w: artifact name %q must be 1-%d characters of A-Z a-z 0-9 . _ - not starting with a dot",
			ErrInvalid, clip(name, 40), MaxArtifactName)
	}
	if mediaType == "" {
		mediaType = MediaTypeFor(name)
	}
	if len(mediaType) > maxMediaType {
		return ArtifactRef{}, fmt.Errorf("%w: media type is longer than %d bytes", ErrInvalid, maxMediaType)
	}
	mt, params, err := mime.ParseMediaType(mediaType)
	if err != nil {
		return ArtifactRef{}, fmt.Errorf("%w: media type %q: %v", ErrInvalid, clip(mediaType, 40), err)
	}
	if mediaType = mime.FormatMediaType(mt, params); mediaType == "" {
		return ArtifactRef{}, fmt.Errorf("%w: media type %q is not valid", ErrInvalid, clip(mt, 40))
	}
	if len(content) > MaxArtifactBytes {
		return ArtifactRef{}, fmt.Errorf("%w: artifact %q is %d bytes; an artifact may hold at most %d bytes",
			ErrTooLarge, name, len(content), MaxArtifactBytes)
	}
	if content == nil {
		content = []byte{} // content is NOT NULL
	}
	ref := ArtifactRef{ID: uuid.New(), Name: name, MediaType: mediaType, Size: int64(len(content)), SHA256: sha256Hex(content)}
	var turnID uuid.NullUUID
	if turn != uuid.Nil {
		turnID = uuid.NullUUID{UUID: turn, Valid: true}
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO artifacts (id, owner_id, turn_id, name, media_type, size, sha256, content)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		ref.ID, owner, turnID, ref.Name, ref.MediaType, ref.Size, ref.SHA256, content); err != nil {
		return ArtifactRef{}, fmt.Errorf("create artifact: %w", err)
	}
	return ref, nil
}

// visibleArtifact selects artifact $2 for viewer $1 only when the viewer
// may read it now: they own it, or a room they are a current member of
// holds a reference to it, and they may read the evidence of the turn
// that made it. refs are the digests of those references.
var visibleArtifact = `
SELECT a.name, a.media_type, a.size, a.sha256, %s,
       ARRAY(SELECT rr.digest FROM room_resources rr
             WHERE rr.artifact_id = a.id AND ` + authority.MemberSQL("rr.conversation_id", "$1") + `
             ORDER BY rr.id) AS refs
FROM artifacts a
WHERE a.id = $2 AND ` + authority.ArtifactReadableSQL("a.id", "a.owner_id", "a.turn_id", "$1")

var (
	statArtifact = fmt.Sprintf(visibleArtifact, "NULL::bytea")
	readArtifact = fmt.Sprintf(visibleArtifact, "a.content")
)

// StatArtifact returns an artifact's record, re-authorising the viewer as
// ReadArtifact does, without reading or verifying its content.
func StatArtifact(ctx context.Context, q pg.Querier, viewer uuid.UUID, id uuid.UUID) (ArtifactRef, error) {
	ref, _, _, err := loadArtifact(ctx, q, statArtifact, viewer, id)
	return ref, err
}

// ReadArtifact returns an artifact and its content, re-authorising the
// viewer at the moment of the read: they own it, or a room they are a
// current member of references it. Anything else is ErrArtifactNotFound,
// exactly like an artifact that does not exist. Before any byte is
// returned the content's sha256 is checked against the stored one and
// against the digest of every room reference through which the viewer
// sees it; a mismatch is ErrDigestMismatch, with no bytes.
func ReadArtifact(ctx context.Context, q pg.Querier, viewer uuid.UUID, id uuid.UUID) (ArtifactRef, []byte, error) {
	ref, content, refs, err := loadArtifact(ctx, q, readArtifact, viewer, id)
	if err != nil {
		return ArtifactRef{}, nil, err
	}
	got := sha256Hex(content)
	if int64(len(content)) != ref.Size || !strings.EqualFold(got, ref.SHA256) {
		return ArtifactRef{}, nil, fmt.Errorf("%w: artifact %s: content sha256 %s, stored %s", ErrDigestMismatch, id, got, ref.SHA256)
	}
	for _, d := range refs {
		if !strings.EqualFold(got, d) {
			return ArtifactRef{}, nil, fmt.Errorf("%w: artifact %s: content sha256 %s, room reference %s", ErrDigestMismatch, id, got, d)
		}
	}
	return ref, content, nil
}

// artifactEvidence is the evidence of the turns that made the artifacts
// ($1): every document their content may derive from.
const artifactEvidence = `
SELECT DISTINCT ev.document_id FROM artifacts a
JOIN turns t ON t.id = a.turn_id
JOIN turn_evidence ev ON ev.conversation_id = t.conversation_id AND ev.turn_id = t.id
WHERE a.id = ANY($1::uuid[])`

// ArtifactEvidence returns every document the artifacts ids derive from:
// the evidence of the turns that made them. An uploaded artifact (made in
// no turn) derives from none.
func ArtifactEvidence(ctx context.Context, q pg.Querier, ids []uuid.UUID) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	strs := make(pq.StringArray, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	docs, err := pg.QueryIDs(ctx, q, artifactEvidence, strs)
	if err != nil {
		return nil, fmt.Errorf("evidence of artifacts: %w", err)
	}
	return docs, nil
}

// audienceReadsArtifact is true when every current member of room $2 may
// read the evidence of the turn that made artifact $1 (or no turn made
// it).
var audienceReadsArtifact = `
SELECT NOT EXISTS (SELECT 1 FROM artifacts a JOIN turns mk ON mk.id = a.turn_id
  WHERE a.id = $1 AND NOT ` + authority.TurnAudienceReadableSQL("mk.conversation_id", "mk.id", "$2") + `)`

// AudienceMayRead reports whether every current member of room may read
// now what the artifact id derives from — the evidence of the turn that
// made it — so its content may enter a model context built for that room.
// An uploaded artifact (made in no turn) derives from no document.
func AudienceMayRead(ctx context.Context, q pg.Querier, id, room uuid.UUID) (bool, error) {
	var ok bool
	if err := pg.QueryRow(ctx, q, audienceReadsArtifact, []any{id, room}, &ok); err != nil {
		return false, fmt.Errorf("audience of artifact %s: %w", id, err)
	}
	return ok, nil
}

func loadArtifact(ctx context.Context, q pg.Querier, query string, viewer, id uuid.UUID) (ArtifactRef, []byte, []string, error) {
	if viewer == uuid.Nil || id == uuid.Nil {
		return ArtifactRef{}, nil, nil, ErrArtifactNotFound
	}
	ref := ArtifactRef{ID: id}
	var content []byte
	var refs pq.StringArray
	err := pg.QueryRow(ctx, q, query, []any{viewer, id}, &ref.Name, &ref.MediaType, &ref.Size, &ref.SHA256, &content, &refs)
	if errors.Is(err, sql.ErrNoRows) {
		return ArtifactRef{}, nil, nil, ErrArtifactNotFound
	}
	if err != nil {
		return ArtifactRef{}, nil, nil, fmt.Errorf("read artifact: %w", err)
	}
	return ref, content, refs, nil
}
