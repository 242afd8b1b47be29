package graph

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/journal"
)

// TestEntryCacheConvertsOnceAndKnowsChangedBytes: streams of one room
// share one conversion of an entry; the same position read with other
// bytes (a withheld answer's delta, blanked) is converted again, never
// served stale; the cache holds at most entryCacheSize entries.
func TestEntryCacheConvertsOnceAndKnowsChangedBytes(t *testing.T) {
	var c entryCache
	room := uuid.New()
	delta := func(seq int64, text string) journal.Entry {
		raw, _ := json.Marshal(journal.DeltaPayload{Text: text})
		return journal.Entry{ConversationID: room, Seq: seq, Kind: journal.KindAnswerDelta, Payload: raw}
	}
	a, b := c.convert(delta(7, "hello")), c.convert(delta(7, "hello"))
	if a != b {
		t.Fatal("the same entry was converted twice")
	}
	blanked := c.convert(delta(7, ""))
	if blanked == a || blanked.Delta == nil || blanked.Delta.Text != "" {
		t.Fatalf("the entry read with other bytes was served from the cache: %+v", blanked.Delta)
	}
	for i := range entryCacheSize + 10 {
		c.convert(delta(int64(100+i), "x"))
	}
	if len(c.byKey) > entryCacheSize || len(c.order) > entryCacheSize {
		t.Fatalf("cache holds %d entries (%d in order), bound %d", len(c.byKey), len(c.order), entryCacheSize)
	}
}
