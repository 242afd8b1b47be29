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
// exact payload it was converted from, in at most two forms — as stored,
// and as the viewers it is withheld from read it (feed: a delta's text
// blanked, the same for all of them) — so an entry read with other bytes
// is converted afresh. The model values it returns are shared: read
// them, never change them.
type entryCache struct {
	mu    sync.Mutex
	byKey map[entryKey]cachedEntry
	order []entryKey // oldest first, for eviction
}

type entryKey struct {
	room uuid.UUID
	seq  int64
}

// cachedEntry is an entry's converted forms, newest last.
type cachedEntry []entryForm

type entryForm struct {
	payload []byte
	entry   *model.JournalEntry
}

// entryForms is how many forms of one entry are kept.
const entryForms = 2

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
	if ok {
		for _, f := range hit {
			if bytes.Equal(f.payload, e.Payload) {
				return f.entry
			}
		}
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
	forms := c.byKey[k]
	// Another stream may have converted the same bytes since the lookup:
	// its value is the one every stream gets.
	for _, f := range forms {
		if bytes.Equal(f.payload, e.Payload) {
			return f.entry
		}
	}
	if len(forms) >= entryForms {
		forms = forms[1:]
	}
	c.byKey[k] = append(forms[:len(forms):len(forms)], entryForm{payload: e.Payload, entry: out})
	return out
}
