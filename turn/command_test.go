package turn_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
	roompkg "github.com/turngate/turngate/room"
	"github.com/turngate/turngate/runner"
)

func commandState(t *testing.T, env *testkit.Env, id uuid.UUID) (state string, token *int64) {
	t.Helper()
	if err := env.DB.QueryRow(`SELECT state, delivered_lease_token FROM commands WHERE id = $1`, id).Scan(&state, &token); err != nil {
		t.Fatal(err)
	}
	return state, token
}

// A queued turn is cancelled at once, and a retry of the command converges.
func TestCancelQueuedTurn(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt := env.Submit(t, env.Alice, env.Shared.ID, "never mind") // no runner: stays queued
	cmd := uuid.New()
	for range 2 {
		got, err := env.Turns.Cancel(ctx, env.Alice, cmd, tt.ID)
		if err != nil || got.State != "cancelled" {
			t.Fatalf("cancel: %v, %v", got, err)
		}
	}
	if k := env.Kinds(t, tt.ID); k[journal.KindTurnTerminal] != 1 {
		t.Fatalf("journal kinds %v, want one terminal", k)
	}
	if st, _ := commandState(t, env, cmd); st != "delivered" {
		t.Fatalf("command %s, want delivered", st)
	}
	// The lane moves on.
	next := env.Submit(t, env.Bob, env.Shared.ID, "after the cancelled one")
	env.Runner(t, runner.Config{})
	if got := env.WaitTerminal(t, next.ID); got.State != "completed" {
		t.Fatalf("next turn ended %s", got.State)
	}
}

// A running turn's owner aborts the runtime and records cancelled, fenced
// by its lease token.
func TestCancelRunningTurn(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	gate := testkit.NewGatedModel()
	env.Runner(t, runner.Config{Gateway: gate.Gateway()})
	tt := env.Submit(t, env.Bob, env.Shared.ID, "stop me")
	<-gate.Started
	cmd := uuid.New()
	// The room's owner may cancel a member's turn in a shared room.
	if _, err := env.Turns.Cancel(ctx, env.Alice, cmd, tt.ID); err != nil {
		t.Fatal(err)
	}
	got := env.WaitTerminal(t, tt.ID)
	if got.State != "cancelled" || *got.TerminalReason != outcome.ReasonCancelled || got.Answer != nil {
		t.Fatalf("turn ended %s (%v)", got.State, got.TerminalReason)
	}
	st, token := commandState(t, env, cmd)
	if st != "delivered" || token == nil || *token != got.LeaseToken {
		t.Fatalf("command %s with token %v, want delivered with the run's token %d", st, token, got.LeaseToken)
	}
	if k := env.Kinds(t, tt.ID); k[journal.KindTurnTerminal] != 1 || k[journal.KindTurnAnswer] != 0 {
		t.Fatalf("journal kinds %v", k)
	}
}

func TestCancelRefusals(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	alices := env.Submit(t, env.Alice, env.Shared.ID, "mine")
	mallory := env.NewMember(t, "mallory@example.com")
	cmd := uuid.New()
	tests := []struct {
		name  string
		actor func() error
		code  errcode.Code
	}{
		{"a member who is neither author nor owner", func() error { _, err := env.Turns.Cancel(ctx, env.Bob, uuid.New(), alices.ID); return err }, errcode.Forbidden},
		{"not a member", func() error { _, err := env.Turns.Cancel(ctx, mallory, uuid.New(), alices.ID); return err }, errcode.NotFound},
		{"no such turn", func() error { _, err := env.Turns.Cancel(ctx, env.Alice, uuid.New(), uuid.New()); return err }, errcode.NotFound},
	}
	for _, tt := range tests {
		before := snapshot(t, env)
		if e, ok := errcode.From(tt.actor()); !ok || e.Code != tt.code {
			t.Errorf("%s: err %v, want %s", tt.name, e, tt.code)
		}
		if after := snapshot(t, env); after != before {
			t.Errorf("%s changed the database", tt.name)
		}
	}
	// A command id reused for another command is a conflict.
	if _, err := env.Turns.Cancel(ctx, env.Alice, cmd, alices.ID); err != nil {
		t.Fatal(err)
	}
	other := env.Submit(t, env.Alice, env.Shared.ID, "another")
	if _, err := env.Turns.Cancel(ctx, env.Alice, cmd, other.ID); errcode.Code(codeOf(err)) != errcode.Conflict {
		t.Fatalf("reused command id: %v, want CONFLICT", err)
	}
	// Cancelling a finished turn is a conflict.
	if _, err := env.Turns.Cancel(ctx, env.Alice, uuid.New(), alices.ID); errcode.Code(codeOf(err)) != errcode.Conflict {
		t.Fatalf("cancel of a finished turn: %v, want CONFLICT", err)
	}
}

func codeOf(err error) string {
	if e, ok := errcode.From(err); ok {
		return string(e.Code)
	}
	return ""
}

// Cancel racing completion, 200 times: exactly one terminal each time,
// whichever wins.
func TestCancelRacesCompletion(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	env.Runner(t, runner.Config{})
	const n = 200
	ids := make([]uuid.UUID, n)
	var wg sync.WaitGroup
	for i := range n {
		ids[i] = env.Submit(t, env.Alice, env.Private(t, env.Alice).ID, "race me").ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := env.Turns.Cancel(ctx, env.Alice, uuid.New(), ids[i])
			if err != nil && codeOf(err) != string(errcode.Conflict) {
				t.Errorf("cancel %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	outcomes := map[string]int{}
	for _, id := range ids {
		got := env.WaitTerminal(t, id)
		outcomes[string(got.State)]++
		var terminals int
		if err := env.DB.QueryRow(`SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_terminal'`, id).Scan(&terminals); err != nil {
			t.Fatal(err)
		}
		if terminals != 1 {
			t.Fatalf("turn %s has %d terminals", id, terminals)
		}
	}
	var pending int
	if err := env.DB.QueryRow(`SELECT count(*) FROM commands WHERE state = 'pending'`).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("%d commands left pending (%v)", pending, err)
	}
	t.Logf("outcomes: %v", outcomes)
}

// Cancel racing recovery: turns whose runner died mid-run are cancelled
// while a live runner salvages them. A cancel stored before the takeover is
// never lost to it: that turn ends cancelled. One racing the recovered run
// either stops it (cancelled, the command delivered) or comes too late for
// its terminal (completed, the command rejected — or refused as CONFLICT
// once the turn has ended). Each turn has exactly one terminal, and no
// command is left pending.
func TestCancelRacesRecovery(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	const n = 40
	ids := make([]uuid.UUID, n)
	for i := range n {
		room, err := env.Rooms.Create(ctx, env.Alice, roompkg.NewInput{Title: fmt.Sprintf("dead %d", i), Kind: "private"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = env.Submit(t, env.Alice, room.ID, "orphaned").ID
		// A runner that claims the turn and dies at once.
		if _, err := lease.NewStore(env.Client, env.Hub).Claim(ctx, lease.ClaimParams{TurnID: ids[i], Owner: "dead-runner", TTL: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	cancel := func(i int) {
		if _, err := env.Turns.Cancel(ctx, env.Alice, uuid.New(), ids[i]); err != nil && codeOf(err) != string(errcode.Conflict) {
			t.Errorf("cancel %d: %v", i, err)
		}
	}
	// The first half is cancelled before any runner is up.
	for i := range n / 2 {
		cancel(i)
	}
	var wg sync.WaitGroup
	for i := n / 2; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cancel(i)
		}()
	}
	env.Runner(t, runner.Config{LeaseTTL: 200 * time.Millisecond, Poll: 20 * time.Millisecond})
	wg.Wait()
	for i, id := range ids {
		got := env.WaitTerminal(t, id)
		var terminals int
		if err := env.DB.QueryRow(`SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_terminal'`, id).Scan(&terminals); err != nil {
			t.Fatal(err)
		}
		if terminals != 1 {
			t.Fatalf("turn %s has %d terminals", id, terminals)
		}
		var delivered int
		if err := env.DB.QueryRow(`SELECT count(*) FROM commands WHERE turn_id = $1 AND state = 'delivered'`, id).Scan(&delivered); err != nil {
			t.Fatal(err)
		}
		switch {
		case i < n/2 && got.State != "cancelled":
			t.Errorf("turn %s, cancelled before the takeover, ended %s", id, got.State)
		case (got.State == "cancelled") != (delivered == 1):
			t.Errorf("turn %s ended %s with %d delivered cancels", id, got.State, delivered)
		}
	}
	var pending int
	if err := env.DB.QueryRow(`SELECT count(*) FROM commands WHERE state = 'pending'`).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("%d commands left pending (%v)", pending, err)
	}
}
