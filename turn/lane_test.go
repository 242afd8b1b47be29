package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
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

// TestTerminalExactlyOnce: two concurrent terminal commits for one run ->
// one lands, the other gets ErrFenced and changes nothing.
func TestTerminalExactlyOnce(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "finish me twice")
	c := env.ClaimHead(t, tt.ID, "r1")

	answers := []string{"answer one", "answer two"}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = lease.NewStore(env.Client, env.Hub).Terminal(ctx, lease.TerminalParams{Fence: c.Fence, State: "completed", Answer: &answers[i]})
		}()
	}
	close(start)
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatal("both terminal commits landed")
			}
			won = i
		case !errors.Is(err, lease.ErrFenced):
			t.Fatalf("commit %d: %v, want ErrFenced", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no terminal commit landed")
	}
	got, err := env.Client.Turn.Get(ctx, tt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Answer == nil || *got.Answer != answers[won] {
		t.Fatalf("stored answer %v, want %q", got.Answer, answers[won])
	}
	terminals, answerEntries := 0, 0
	for _, e := range env.Entries(t, env.Shared.ID) {
		switch e.Kind {
		case journal.KindTurnTerminal:
			terminals++
		case journal.KindTurnAnswer:
			answerEntries++
		}
	}
	if terminals != 1 || answerEntries != 1 {
		t.Fatalf("terminals=%d answers=%d, want 1 each", terminals, answerEntries)
	}
}

// TestStaleTokenWritesNothing: every kind of run write with an old lease
// token fails with ErrFenced, and the rows it would touch are unchanged.
func TestStaleTokenWritesNothing(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "fence me")
	old := env.ClaimHead(t, tt.ID, "old-owner")
	// The old owner is fenced: its turn is handed back and re-claimed,
	// which increments the token.
	if err := lease.NewStore(env.Client, env.Hub).Release(ctx, lease.ReleaseParams{Fence: old.Fence}); err != nil {
		t.Fatal(err)
	}
	cur := env.ClaimHead(t, tt.ID, "new-owner")
	if cur.Fence.LeaseToken <= old.Fence.LeaseToken {
		t.Fatalf("re-claim token %d not above %d", cur.Fence.LeaseToken, old.Fence.LeaseToken)
	}
	before := turnRow(t, env, tt.ID)
	entriesBefore := len(env.Entries(t, env.Shared.ID))
	answer := "stale answer"

	writes := []struct {
		name  string
		write func() error
	}{
		{"answer delta", func() error {
			_, err := journal.Append(ctx, env.DB, env.Shared.ID, &old.Fence, journal.Draft{Kind: journal.KindAnswerDelta, TurnID: uuid.NullUUID{UUID: tt.ID, Valid: true}})
			return err
		}},
		{"heartbeat", func() error {
			return lease.NewStore(env.Client, env.Hub).Renew(ctx, lease.RenewParams{Fence: old.Fence, Owner: "old-owner", TTL: 60})
		}},
		{"terminal", func() error {
			return lease.NewStore(env.Client, env.Hub).Terminal(ctx, lease.TerminalParams{Fence: old.Fence, State: "completed", Answer: &answer})
		}},
		{"failed terminal", func() error {
			return lease.NewStore(env.Client, env.Hub).Terminal(ctx, lease.TerminalParams{Fence: old.Fence, State: "failed", Reason: lease.ReasonInputLeaseLost})
		}},
		{"release", func() error {
			return lease.NewStore(env.Client, env.Hub).Release(ctx, lease.ReleaseParams{Fence: old.Fence})
		}},
	}
	for _, w := range writes {
		err := w.write()
		if !errors.Is(err, lease.ErrFenced) && !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("%s with a stale token: err = %v, want ErrFenced or ErrLeaseLost", w.name, err)
		}
	}
	if after := turnRow(t, env, tt.ID); after != before {
		t.Fatalf("turn row changed by stale writes:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(env.Entries(t, env.Shared.ID)); n != entriesBefore {
		t.Fatalf("journal grew from %d to %d entries under stale writes", entriesBefore, n)
	}
}

func turnRow(t *testing.T, env *testkit.Env, id uuid.UUID) string {
	t.Helper()
	var row string
	if err := env.DB.QueryRow(`SELECT row_to_json(t)::text FROM turns t WHERE id = $1`, id).Scan(&row); err != nil {
		t.Fatal(err)
	}
	return row
}

// TestRenewDoesNotExtendExpiredLease: a renewal that arrives after the
// lease expired — a slow but successful heartbeat — does not revive it.
func TestRenewDoesNotExtendExpiredLease(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "expire me")
	c := env.ClaimHead(t, tt.ID, "r1")
	if err := lease.NewStore(env.Client, env.Hub).Renew(ctx, lease.RenewParams{Fence: c.Fence, Owner: "r1", TTL: 60}); err != nil {
		t.Fatalf("renewing a live lease: %v", err)
	}
	// Backdate the expiry, as if the database clock had moved past it.
	if _, err := env.DB.Exec(`UPDATE turns SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	before := turnRow(t, env, tt.ID)
	if err := lease.NewStore(env.Client, env.Hub).Renew(ctx, lease.RenewParams{Fence: c.Fence, Owner: "r1", TTL: 60}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("renewing an expired lease: err = %v, want ErrLeaseLost", err)
	}
	if after := turnRow(t, env, tt.ID); after != before {
		t.Fatalf("expired lease changed by a late renewal")
	}
	// Another owner's renewal of a live lease is refused too.
	if _, err := env.DB.Exec(`UPDATE turns SET lease_expires_at = now() + interval '1 minute' WHERE id = $1`, tt.ID); err != nil {
		t.Fatal(err)
	}
	if err := lease.NewStore(env.Client, env.Hub).Renew(ctx, lease.RenewParams{Fence: c.Fence, Owner: "someone-else", TTL: 60}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("renewal by another owner: err = %v, want ErrLeaseLost", err)
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
