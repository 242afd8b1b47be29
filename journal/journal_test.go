package journal_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
)

// TestConcurrentAppendsAreDense: appends racing on one room get dense,
// unique positions, and a follower sees them all once, in order.
func TestConcurrentAppendsAreDense(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	room := env.Shared.ID
	head, err := journal.Head(ctx, env.DB, room)
	if err != nil {
		t.Fatal(err)
	}

	followed := make(chan journal.Entry, 1000)
	followErr := make(chan error, 1)
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	go func() {
		followErr <- journal.Follow(fctx, env.DB, env.Hub, room, head, nil, func(e journal.Entry) error {
			followed <- e
			return nil
		})
	}()

	const writers, each = 8, 25
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				tx, err := env.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				entries, err := journal.Append(ctx, tx, room, nil, journal.Draft{Kind: journal.KindCheckpoint, Payload: map[string]int{"n": 1}})
				if err == nil {
					err = tx.Commit()
				}
				if err != nil {
					tx.Rollback()
					t.Error(err)
					return
				}
				env.Hub.Committed(room, entries[0].Seq)
			}
		}()
	}
	wg.Wait()

	want := head + 1
	for want <= head+writers*each {
		select {
		case e := <-followed:
			if e.Seq != want {
				t.Fatalf("follower got seq %d, want %d", e.Seq, want)
			}
			want++
		case err := <-followErr:
			t.Fatalf("follow ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("follower stopped at %d of %d", want-1, head+writers*each)
		}
	}
	if got, _ := journal.Head(ctx, env.DB, room); got != head+writers*each {
		t.Fatalf("head %d, want %d", got, head+writers*each)
	}
}

// TestFencedAppend: an append carrying a fence lands only for the run that
// holds the turn's current lease token.
func TestFencedAppend(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "fence")
	if _, err := env.DB.Exec(`UPDATE turns SET state = 'running', lease_token = 7, lease_expires_at = now() + interval '1 minute' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	draft := journal.Draft{Kind: journal.KindAnswerDelta, TurnID: uuid.NullUUID{UUID: tt.ID, Valid: true}}
	if _, err := journal.Append(ctx, env.DB, env.Shared.ID, &journal.Fence{TurnID: tt.ID, LeaseToken: 7}, draft); err != nil {
		t.Fatalf("append with the current token: %v", err)
	}
	head, _ := journal.Head(ctx, env.DB, env.Shared.ID)
	for _, tok := range []int64{6, 8} {
		_, err := journal.Append(ctx, env.DB, env.Shared.ID, &journal.Fence{TurnID: tt.ID, LeaseToken: tok}, draft)
		if !errors.Is(err, journal.ErrFenced) {
			t.Fatalf("append with token %d: err = %v, want ErrFenced", tok, err)
		}
	}
	if got, _ := journal.Head(ctx, env.DB, env.Shared.ID); got != head {
		t.Fatalf("fenced appends moved the head from %d to %d", head, got)
	}
}

// TestJournalIsAppendOnly: the database refuses to change or delete an
// entry, and refuses a second terminal for one turn.
func TestJournalIsAppendOnly(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	if _, err := env.DB.Exec(`UPDATE journal_entries SET payload = '{}' WHERE conversation_id = $1`, env.Shared.ID); err == nil {
		t.Fatal("UPDATE of a journal entry succeeded")
	}
	if _, err := env.DB.Exec(`DELETE FROM journal_entries WHERE conversation_id = $1`, env.Shared.ID); err == nil {
		t.Fatal("DELETE of a journal entry succeeded")
	}
	tt := env.Submit(t, env.Alice, env.Shared.ID, "one terminal")
	ctx := context.Background()
	terminal := journal.Draft{Kind: journal.KindTurnTerminal, TurnID: uuid.NullUUID{UUID: tt.ID, Valid: true}}
	if _, err := journal.Append(ctx, env.DB, env.Shared.ID, nil, terminal); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Append(ctx, env.DB, env.Shared.ID, nil, terminal); err == nil {
		t.Fatal("a second turn_terminal for one turn was accepted")
	}
}

// TestHubWakesAnotherReplica: a commit on one replica wakes a follower on
// another through LISTEN/NOTIFY, and a follower that missed every
// notification still catches up on the poll tick.
func TestHubWakesAnotherReplica(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other := journal.NewHub(journal.HubConfig{DB: env.DB, ListenURL: env.URL, Poll: time.Hour})
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	deaf := journal.NewHub(journal.HubConfig{DB: env.DB, Poll: 100 * time.Millisecond}) // no LISTEN
	if err := deaf.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer deaf.Stop()

	room := env.Shared.ID
	head, _ := journal.Head(ctx, env.DB, room)
	got := make(chan int64, 2)
	waiting := make(chan struct{}, 2)
	for _, hub := range []*journal.Hub{other, deaf} {
		var once sync.Once
		read := func(ctx context.Context, after int64) ([]journal.Entry, error) {
			entries, err := journal.Read(ctx, env.DB, room, after, 10)
			// After the first (empty) read the follower waits on its hub:
			// from then on only a wake-up brings it the entry.
			once.Do(func() { waiting <- struct{}{} })
			return entries, err
		}
		go func() {
			_ = journal.Follow(ctx, env.DB, hub, room, head, read, func(e journal.Entry) error {
				got <- e.Seq
				return errors.New("done")
			})
		}()
	}
	<-waiting
	<-waiting
	// The listener may not be listening yet: keep appending (each append a
	// fresh hint) until both followers have seen an entry. This replica's
	// own hub never reaches the other two.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	seen := 0
	for seen < 2 {
		select {
		case <-got:
			seen++
		case <-tick.C:
			entries, err := journal.Append(ctx, env.DB, room, nil, journal.Draft{Kind: journal.KindCheckpoint})
			if err != nil {
				t.Fatal(err)
			}
			env.Hub.Committed(room, entries[0].Seq)
		case <-ctx.Done():
			t.Fatalf("%d of 2 followers woke", seen)
		}
	}
}
