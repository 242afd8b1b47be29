package graph

import (
	"bytes"
	"sync"

	"github.com/google/uuid"

	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/journal"
)

// entryCacheSize bounds the converted entries kept: enough for every
// room's newest entries while a turn streams to its watchers.
const entryCacheSize = 4096

// entryCache converts a journal entry to its GraphQL form once for every
// stream of the room on this replica: with ten thousand watchers each
// answer delta was decoded ten thousand times. An entry is kept with the
// exact payload it was converted from, so an entry read again with other
// bytes (a withheld answer's delta, blanked) is converted afresh. Only
// entries that read the same for every viewer go through it (not
// tool_completed or turn_answer, which entryFor filters per viewer). The
// model values it returns are shared: read them, never change them.
type entryCache struct {
	mu    sync.Mutex
	byKey map[entryKey]cachedEntry
	order []entryKey // oldest first, for eviction
}

type entryKey struct {
	room uuid.UUID
	seq  int64
}

type cachedEntry struct {
	payload []byte
	entry   *model.JournalEntry
}

// convert is toEntry(e), shared with every other stream that converts
// the same entry.
func (c *entryCache) convert(e journal.Entry) *model.JournalEntry {
	if c == nil {
		return toEntry(e)
	}
	k := entryKey{e.ConversationID, e.Seq}
	c.mu.Lock()
	hit, ok := c.byKey[k]
	c.mu.Unlock()
	if ok && bytes.Equal(hit.payload, e.Payload) {
		return hit.entry
	}
	out := toEntry(e)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = make(map[entryKey]cachedEntry, entryCacheSize)
	}
	if _, had := c.byKey[k]; !had {
		if len(c.order) >= entryCacheSize {
			delete(c.byKey, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, k)
	}
	c.byKey[k] = cachedEntry{payload: e.Payload, entry: out}
	return out
}
