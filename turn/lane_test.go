package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/turn"
)

// TestAcceptanceBehindAQueuedAcceptance: an acceptance that waited on the
// room's row lock while an earlier one committed a queued turn (its
// replica had no runner, or no free slot) does not start its own turn:
// the idle check is made after the lock, so the later turn queues behind
// the earlier one, and the earlier one is claimed first.
func TestAcceptanceBehindAQueuedAcceptance(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The later acceptance's replica: a runner with free slots, deaf to
	// the room's commits (a hub of its own, with no LISTEN, and a sweep
	// that never comes), so its claim loop stays out of the interleaving
	// and the one claim it can make is the accept-time one.
	r := runner.New(runner.Config{Client: env.Client, Hub: journal.NewHub(journal.HubConfig{DB: env.DB}),
		Gateway: gateway.New(map[string]gateway.Provider{"builtin": gateway.Builtin{}}), Owner: "later-replica", Poll: time.Hour})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	env.Turns.Runner = r

	// The earlier acceptance's replica runs with no runner; its
	// acceptance holds the room's row lock, once taken, until released.
	early := &turn.Service{Client: env.Client, DB: env.DB, Hub: env.Hub}
	locked, release := make(chan struct{}), make(chan struct{})
	turn.SetTakeHooks(early, func() { close(locked); <-release }, nil)
	type accepted struct {
		t   *ent.Turn
		err error
	}
	earlyDone, laterDone := make(chan accepted, 1), make(chan accepted, 1)
	go func() {
		tt, err := early.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: env.Shared.ID, Text: "first", IdempotencyKey: "earlier"})
		earlyDone <- accepted{tt, err}
	}()
	select {
	case <-locked:
	case <-ctx.Done():
		t.Fatal("the earlier acceptance did not take the room's row lock")
	}
	go func() {
		tt, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Bob, ConversationID: env.Shared.ID, Text: "second", IdempotencyKey: "later"})
		laterDone <- accepted{tt, err}
	}()
	// The later acceptance's statement waits on the room's row: its
	// snapshot was taken before the earlier turn exists.
	for waiting := 0; waiting == 0; {
		if err := env.DB.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%next_seq%'`).Scan(&waiting); err != nil {
			t.Fatalf("the later acceptance's wait: %v", err)
		}
		if waiting == 0 {
			select {
			case <-ctx.Done():
				t.Fatal("the later acceptance never waited on the room's row lock")
			case <-time.After(time.Millisecond):
			}
		}
	}
	close(release)
	first, second := <-earlyDone, <-laterDone
	if first.err != nil || second.err != nil {
		t.Fatalf("earlier: %v; later: %v", first.err, second.err)
	}
	if first.t.Position >= second.t.Position {
		t.Fatalf("earlier at position %d, later at %d", first.t.Position, second.t.Position)
	}
	if second.t.State != "queued" {
		t.Fatalf("the later turn (position %d) came back %s while position %d was queued", second.t.Position, second.t.State, first.t.Position)
	}

	// The lane, claimed as a runner claims it: the later turn is not its
	// head; the earlier is, and starts first.
	store := lease.NewStore(env.Client, env.Hub)
	claim := func(id uuid.UUID) (*lease.Claimed, error) {
		return store.Claim(ctx, lease.ClaimParams{TurnID: id, Owner: "claimer", TTL: time.Minute})
	}
	if _, err := claim(second.t.ID); !errors.Is(err, lease.ErrNotClaimable) {
		t.Fatalf("claiming the later turn first: %v, want ErrNotClaimable", err)
	}
	c, err := claim(first.t.ID)
	if err != nil {
		t.Fatalf("claiming the earlier turn: %v", err)
	}
	answer := "done"
	if err := store.Terminal(ctx, lease.TerminalParams{Fence: c.Fence, State: "completed", Answer: &answer}); err != nil {
		t.Fatal(err)
	}
	if _, err := claim(second.t.ID); err != nil {
		t.Fatalf("claiming the later turn after the earlier ended: %v", err)
	}
	var started []uuid.UUID
	for _, e := range env.Entries(t, env.Shared.ID) {
		if e.Kind == journal.KindTurnStarted {
			started = append(started, e.TurnID.UUID)
		}
	}
	if want := []uuid.UUID{first.t.ID, second.t.ID}; !slices.Equal(started, want) {
		t.Fatalf("turns started in the order %v, want %v", started, want)
	}
}

// TestAcceptanceIntoAnIdleLaneStartsTheTurn: a turn accepted into an idle
// lane by a replica with a free run slot comes back running, its
// turn_started right after its turn_accepted: the lane read after the
// room's lock does not count the turn being accepted.
func TestAcceptanceIntoAnIdleLaneStartsTheTurn(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	r := env.Runner(t, runner.Config{Owner: "acceptor"})
	env.Turns.Runner = r
	tt := env.Submit(t, env.Alice, env.Shared.ID, "start me now")
	if tt.State != "running" {
		t.Fatalf("accepted into an idle lane: %s, want running", tt.State)
	}
	var started journal.Entry
	for _, e := range env.Entries(t, env.Shared.ID) {
		if e.Kind == journal.KindTurnStarted && e.TurnID.UUID == tt.ID {
			started = e
			break
		}
	}
	var p journal.StartedPayload
	if err := json.Unmarshal(started.Payload, &p); err != nil {
		t.Fatalf("turn_started at %d: %v", started.Seq, err)
	}
	if started.Seq != tt.Position+1 || p.Runner != "acceptor" {
		t.Fatalf("turn_started at %d by %q, want %d by the acceptor", started.Seq, p.Runner, tt.Position+1)
	}
}
