package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/turn"
)

// TestLaneFIFO: 20 messages from two members, submitted concurrently into
// one shared room, run one at a time in position order — with two runners
// racing for the lane.
func TestLaneFIFO(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		m := env.Alice
		if i%2 == 1 {
			m = env.Bob
		}
		wg.Add(1)
		go func(m authority.Member, i int) {
			defer wg.Done()
			_, err := env.Turns.Submit(ctx, turn.Submission{Member: m, ConversationID: env.Shared.ID,
				Text: fmt.Sprintf("message %d", i), IdempotencyKey: fmt.Sprintf("fifo-%d", i)})
			errs <- err
		}(m, i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	env.Runner(t, runner.Config{Owner: "runner-a"})
	env.Runner(t, runner.Config{Owner: "runner-b"})

	var turns []uuid.UUID
	rows, err := env.DB.Query(`SELECT id FROM turns WHERE conversation_id = $1 ORDER BY position`, env.Shared.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, id)
	}
	rows.Close()
	if len(turns) != 20 {
		t.Fatalf("%d turns, want 20", len(turns))
	}
	for _, id := range turns {
		if got := env.WaitTerminal(t, id); got.State != "completed" {
			t.Fatalf("turn %s ended %s (%v)", id, got.State, got.TerminalReason)
		}
	}

	// Replay the journal: a turn starts only after the one before it in
	// the lane has its terminal, so at most one runs at any position.
	var running uuid.NullUUID
	next := 0
	for _, e := range env.Entries(t, env.Shared.ID) {
		switch e.Kind {
		case journal.KindTurnStarted:
			if running.Valid {
				t.Fatalf("seq %d: turn %s started while %s was running", e.Seq, e.TurnID.UUID, running.UUID)
			}
			if e.TurnID.UUID != turns[next] {
				t.Fatalf("seq %d: turn %s started, want %s (lane position %d)", e.Seq, e.TurnID.UUID, turns[next], next)
			}
			running = e.TurnID
		case journal.KindTurnTerminal:
			if !running.Valid || running.UUID != e.TurnID.UUID {
				t.Fatalf("seq %d: terminal of %s, but %v was running", e.Seq, e.TurnID.UUID, running)
			}
			running = uuid.NullUUID{}
			next++
		}
	}
	if next != 20 {
		t.Fatalf("%d turns finished in the journal, want 20", next)
	}
}

// TestStoppedRunnerDetaches: stopping a runner mid-turn is not member
// intent. The turn gets no cancelled terminal; it goes back to its lane
// and the next runner completes it.
func TestStoppedRunnerDetaches(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	gate := testkit.NewGatedModel()
	r := env.Runner(t, runner.Config{Owner: "first", Gateway: gate.Gateway(), Drain: 20 * time.Millisecond})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "survive a stop")
	<-gate.Started // the model step is running
	r.Stop()

	got := env.WaitTurn(t, tt.ID, func(tt *ent.Turn) bool { return tt.State == "queued" })
	if got.TerminalReason != nil {
		t.Fatalf("a stopped runner recorded a terminal reason %q", *got.TerminalReason)
	}
	for _, e := range env.Entries(t, env.Shared.ID) {
		if e.Kind == journal.KindTurnTerminal {
			t.Fatalf("a stopped runner wrote a terminal: %s", e.Payload)
		}
	}

	env.Runner(t, runner.Config{Owner: "second"})
	final := env.WaitTerminal(t, tt.ID)
	if final.State != "completed" || final.Attempt != 2 {
		t.Fatalf("after takeover: state %s attempt %d, want completed on attempt 2", final.State, final.Attempt)
	}
}
