package resource

import (
	"context"

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
