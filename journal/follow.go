package journal

import (
	"context"

	"github.com/google/uuid"

	"github.com/turngate/turngate/pg"
)

// FollowBatch is how many entries a follower reads per query.
const FollowBatch = 256

// Follow reads the room's entries after position `after` and passes each to
// emit in position order: first everything already durable, then new
// entries as the Hub reports them, until ctx ends or emit returns an error
// (which Follow returns). read selects the entries; nil reads them all.
//
// Entries always come from the database, after the last position emitted,
// so a follower never skips or repeats one however late it is woken.
func Follow(ctx context.Context, q pg.Querier, hub *Hub, room uuid.UUID, after int64,
	read func(ctx context.Context, after int64) ([]Entry, error), emit func(Entry) error) error {
	if read == nil {
		read = func(ctx context.Context, after int64) ([]Entry, error) {
			return Read(ctx, q, room, after, FollowBatch)
		}
	}
	for {
		// Take the wake-up before reading, so a commit that lands between
		// the read and the wait still wakes us.
		wake := hub.Wait(room)
		entries, err := read(ctx, after)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := emit(e); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(entries) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}
