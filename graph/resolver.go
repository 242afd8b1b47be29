// Package graph holds the GraphQL resolvers. They are thin: read the
// identity from the context, make one domain call, map the result. The
// generated executor lives in graph/generated and the types in graph/model.
package graph

import (
	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/turn"
)

// Resolver holds the resolvers' dependencies.
type Resolver struct {
	Client  *ent.Client
	Members *authority.Members
	Rooms   *room.Service
	Turns   *turn.Service
	Hub     *journal.Hub
	// MaxTextLen bounds a submitted message, in characters.
	MaxTextLen int
}
