package resource

import (
	"bytes"
	"context"
	"slices"
	"time"

	"fmt"
	"strings"

	"golang.org/x/sync/singleflight"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/pg"
)

// Store is the resources as the API reaches them outside a transaction:
// each call is one statement, authorised for the viewer at that moment.
// Code that must act inside a transaction calls the package functions
// with its own handle.
type Store struct {
	db pg.Querier
	// readable collapses identical concurrent Readable calls (one
	// viewer, the same documents) into one statement: ten thousand
	// streams of one member delivering the same cited answer ask once.
	// Only calls that overlap the statement share its result, so each
	// answer is still as of a moment during the call.
	readable singleflight.Group
}

// NewStore returns a Store over db.
func NewStore(db pg.Querier) *Store { return &Store{db: db} }

// Stat is StatArtifact.
func (s *Store) Stat(ctx context.Context, viewer, id uuid.UUID) (ArtifactRef, error) {
	return StatArtifact(ctx, s.db, viewer, id)
}

// Read is ReadArtifact.
func (s *Store) Read(ctx context.Context, viewer, id uuid.UUID) (ArtifactRef, []byte, error) {
	return ReadArtifact(ctx, s.db, viewer, id)
}

// Documents lists what viewer may read now (ListDocuments): nothing
// without the documents.read permission (authority.MayReadDocuments).
func (s *Store) Documents(ctx context.Context, viewer authority.Member, query string, first, offset int) ([]DocumentRef, error) {
	may, err := authority.MayReadDocuments(ctx, s.db, viewer.ID)
	if err != nil || !may {
		return []DocumentRef{}, err
	}
	return ListDocuments(ctx, s.db, authority.Principal(viewer.Email), query, first, offset)
}

// Readable returns which of docs viewer may read now: documents.read and
// each document's ACL (authority's rules). Reads of what a turn cited
// apply it per viewer, as defence in depth behind the audience rule the
// turn's tools applied.
//
// The map returned is shared with concurrent callers: read it, never
// change it.
func (s *Store) Readable(ctx context.Context, viewer authority.Member, docs []uuid.UUID) (map[uuid.UUID]bool, error) {
	if len(docs) == 0 {
		return map[uuid.UUID]bool{}, nil
	}
	sorted := slices.Clone(docs)
	slices.SortFunc(sorted, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	var key strings.Builder
	key.WriteString(viewer.ID.String())
	key.WriteString(viewer.Email)
	for _, d := range slices.Compact(sorted) {
		key.WriteString(d.String())
	}
	v, err, _ := s.readable.Do(key.String(), func() (any, error) {
		// The first caller's cancellation must not fail the others.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readableTimeout)
		defer cancel()
		return s.readableNow(ctx, viewer, docs)
	})
	if err != nil {
		return nil, err
	}
	return v.(map[uuid.UUID]bool), nil
}

// readableTimeout bounds one shared Readable statement.
const readableTimeout = 10 * time.Second

func (s *Store) readableNow(ctx context.Context, viewer authority.Member, docs []uuid.UUID) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	may, err := authority.MayReadDocuments(ctx, s.db, viewer.ID)
	if err != nil || !may {
		return out, err
	}
	strs := make([]string, len(docs))
	for i, d := range docs {
		strs[i] = d.String()
	}
	ids, err := pg.QueryIDs(ctx, s.db, `SELECT d.id FROM documents d WHERE d.id = ANY($2::uuid[]) AND `+
		authority.DocumentReadableSQL("d.id", "$1"), authority.Principal(viewer.Email), "{"+strings.Join(strs, ",")+"}")
	if err != nil {
		return nil, fmt.Errorf("readable documents: %w", err)
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
