package journal

import (
	"context"

	"github.com/google/uuid"

	"github.com/turngate/turngate/pg"
)

// Log is the journal as its readers reach it: reads on one database
// handle, follows woken by the hub. Resolvers hold a Log, not the handle.
type Log struct {
	db    pg.Querier
	hub   *Hub
	tails tails
}

// NewLog returns a Log reading db, its follows woken by hub.
func NewLog(db pg.Querier, hub *Hub) *Log { return &Log{db: db, hub: hub} }

// Read is Read on the log's handle.
func (l *Log) Read(ctx context.Context, room uuid.UUID, after int64, limit int) ([]Entry, error) {
	return Read(ctx, l.db, room, after, limit)
}

// ReadTurn is ReadTurn on the log's handle.
func (l *Log) ReadTurn(ctx context.Context, turn uuid.UUID, after int64, limit int, kinds ...Kind) ([]Entry, error) {
	return ReadTurn(ctx, l.db, turn, after, limit, kinds...)
}

// Follow is Follow on the log's handle and hub.
func (l *Log) Follow(ctx context.Context, room uuid.UUID, after int64,
	read func(ctx context.Context, after int64) ([]Entry, error), emit func(Entry) error) error {
	return Follow(ctx, l.db, l.hub, room, after, read, emit)
}
