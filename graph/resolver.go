package graph

import (
	"context"

	"github.com/google/uuid"

	"github.com/turngate/turngate/admin"
	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/feed"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/turn"
)

// Runs is the part of the turn runner that clients reach.
type Runs interface {
	Resume(ctx context.Context, turnID uuid.UUID) (bool, error)
	// Hold keeps the room's shared lease watcher running until release.
	Hold(ctx context.Context, room uuid.UUID) (release func())
}

// Resolver holds the resolvers' dependencies.
type Resolver struct {
	Members   *authority.Members
	Rooms     *room.Service
	Turns     *turn.Service
	Resources *resource.Store
	Admin     *admin.Service
	// Feed is what each viewer may read of a room: every read of the
	// journal, a turn and its replay goes through it.
	Feed *feed.Feed
	// Streams owns the subscriptions' goroutines; the server stops it
	// before it closes what they read. Nil leaves them unowned.
	Streams *Streams
	// Runs recovers lost runs for present clients; nil on an API-only
	// replica, which leaves recovery to the others.
	Runs Runs
	// MaxTextLen bounds a submitted message, in characters.
	MaxTextLen int

	// entries converts each journal entry once for all of a room's
	// streams on this replica.
	entries entryCache
}
