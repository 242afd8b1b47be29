package journal_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
)

// TestSharedTailReadsOncePerPosition: a hundred followers of one room on
// one Log are served by the room's shared tail: each new position costs
// one read of the room however many follow it, and every follower — one
// starting from the beginning, behind the tail, too — gets every entry
// once, in order.
func TestSharedTailReadsOncePerPosition(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	room := env.Shared.ID
	// Build up some history first, more than the tail keeps.
	for range journal.TailSize + 10 {
		if _, err := journal.Append(ctx, env.DB, room, nil, journal.Draft{Kind: journal.KindCheckpoint}); err != nil {
			t.Fatal(err)
		}
	}
	head, err := journal.Head(ctx, env.DB, room)
	if err != nil {
		t.Fatal(err)
	}
	log := journal.NewLog(env.DB, env.Hub)
	var reads atomic.Int64
	read := func(ctx context.Context, after int64) ([]journal.Entry, error) {
		reads.Add(1)
		return journal.Read(ctx, env.DB, room, after, journal.FollowBatch)
	}

	const followers, more = 100, 20
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var done sync.WaitGroup
	var caughtUp atomic.Int64 // followers that have the first new entry
	got := make([][]int64, followers+1)
	for i := range followers + 1 {
		from := head
		if i == followers {
			from = 0 // far behind the tail: pages of its own
		}
		done.Add(1)
		go func() {
			defer done.Done()
			err := log.FollowShared(fctx, room, from, read, func(e journal.Entry) error {
				if e.Seq == head+1 {
					caughtUp.Add(1)
				}
				got[i] = append(got[i], e.Seq)
				if e.Seq == head+more {
					return fmt.Errorf("done")
				}
				return nil
			})
			if err == nil || err.Error() != "done" {
				t.Errorf("follower %d: %v", i, err)
			}
		}()
	}
	appendOne := func() {
		t.Helper()
		entries, err := journal.Append(ctx, env.DB, room, nil, journal.Draft{Kind: journal.KindCheckpoint})
		if err != nil {
			t.Fatal(err)
		}
		env.Hub.Committed(room, entries[0].Seq)
	}
	// Once every follower has the first new entry (the one from 0 read
	// its history to get there), all are on the tail: count only what
	// the other new entries cost.
	appendOne()
	for caughtUp.Load() < followers+1 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d followers caught up", caughtUp.Load(), followers+1)
		case <-time.After(5 * time.Millisecond):
		}
	}
	before := reads.Load()
	for range more - 1 {
		appendOne()
	}
	done.Wait()
	for i, seqs := range got {
		from := head
		if i == followers {
			from = 0
		}
		if int64(len(seqs)) != head+more-from || seqs[0] != from+1 || seqs[len(seqs)-1] != head+more {
			t.Fatalf("follower %d got %d entries %d..%d, want %d..%d", i, len(seqs), seqs[0], seqs[len(seqs)-1], from+1, head+more)
		}
		for j := 1; j < len(seqs); j++ {
			if seqs[j] != seqs[j-1]+1 {
				t.Fatalf("follower %d: %d after %d", i, seqs[j], seqs[j-1])
			}
		}
	}
	// One shared read per wake (at most two per new entry: the one that
	// finds it and the empty one that ends the burst; plus a poll tick):
	// nothing per follower.
	if n := reads.Load() - before; n > 2*more+2 {
		t.Fatalf("%d reads for %d entries and %d followers: the followers are not sharing the tail", n, more, followers)
	}
}
