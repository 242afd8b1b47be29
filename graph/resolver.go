// Package graph holds the GraphQL resolvers. They are thin: read the
// identity from the context, make one domain call, map the result. The
// generated executor lives in graph/generated and the types in graph/model.
package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/turn"
)

// Runs is the part of the turn runner that clients reach.
type Runs interface {
	Resume(ctx context.Context, turnID uuid.UUID) (bool, error)
	Watch(ctx context.Context, room uuid.UUID)
}

// Resolver holds the resolvers' dependencies.
type Resolver struct {
	Client  *ent.Client
	Members *authority.Members
	Rooms   *room.Service
	Turns   *turn.Service
	Hub     *journal.Hub
	// Runs recovers lost runs for present clients; nil on an API-only
	// replica, which leaves recovery to the others.
	Runs Runs
	// MaxTextLen bounds a submitted message, in characters.
	MaxTextLen int
}
