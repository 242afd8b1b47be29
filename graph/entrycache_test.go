package graph

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/graph/model"
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

// TestEntryCacheConcurrentStreamsShareOneValue: streams that convert the
// same entry at the same moment all get one value. Each missed the
// cache, converted, and kept its own: the subscribers of one room
// encoded that entry once each instead of once between them.
func TestEntryCacheConcurrentStreamsShareOneValue(t *testing.T) {
	room := uuid.New()
	raw, _ := json.Marshal(journal.DeltaPayload{Text: "hello"})
	for round := range 200 {
		var c entryCache
		e := journal.Entry{ConversationID: room, Seq: int64(round), Kind: journal.KindAnswerDelta, Payload: raw}
		const streams = 8
		got := make([]*model.JournalEntry, streams)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i] = c.convert(e)
			}()
		}
		close(start)
		wg.Wait()
		for i := range got {
			if got[i] != got[0] {
				t.Fatalf("round %d: stream %d got another value than stream 0", round, i)
			}
		}
		if n := len(c.byKey[entryKey{room, e.Seq}]); n != 1 {
			t.Fatalf("round %d: %d forms kept of one entry read with one payload", round, n)
		}
	}
}
