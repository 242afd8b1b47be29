package resource

import (
	"context"

	"github.com/google/uuid"

	"github.com/turngate/turngate/pg"
)

// Store is the resources as the API reaches them outside a transaction:
// each call is one statement, authorised for the viewer at that moment.
// Code that must act inside a transaction calls the package functions
// with its own handle.
type Store struct{ db pg.Querier }

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

// Documents is ListDocuments.
func (s *Store) Documents(ctx context.Context, principal, query string, first int) ([]DocumentRef, error) {
	return ListDocuments(ctx, s.db, principal, query, first)
}
