package runner_test

import (
	"context"
	"testing"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runner"
)

// TestClaimAcceptedBehindTheLane: an accept-time claim for a turn with an
// earlier turn still in its room's lane is refused without an error: the
// reserved slot is given back, the accepting transaction commits with the
// turn queued, and the claim loop runs the lane in order.
func TestClaimAcceptedBehindTheLane(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	earlier := env.Submit(t, env.Alice, env.Shared.ID, "earlier")
	later := env.Submit(t, env.Bob, env.Shared.ID, "later")

	// The accepting transaction holds the room's row lock, as acceptance
	// does; the runner's own claim of the earlier turn, if it comes
	// meanwhile, waits on it.
	tx, err := env.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, env.Shared.ID); err != nil {
		t.Fatal(err)
	}
	// Two slots: one for the loop's claim of the earlier turn, one free.
	r := env.Runner(t, runner.Config{MaxRuns: 2})
	c, ok, err := r.ClaimAccepted(ctx, tx, later, 1)
	if ok {
		r.Unclaim(c) // the transaction will not commit: give the slot back
	}
	if err != nil || ok {
		t.Fatalf("claim at acceptance behind the lane: ok %v, err %v; want refused with no error", ok, err)
	}
	if r.Claiming(later.ID) {
		t.Fatal("the refused claim kept its run slot")
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("the acceptance after a refused claim: %v", err)
	}

	if got := env.WaitTerminal(t, earlier.ID); got.State != "completed" {
		t.Fatalf("earlier turn ended %s", got.State)
	}
	if got := env.WaitTerminal(t, later.ID); got.State != "completed" {
		t.Fatalf("later turn ended %s", got.State)
	}
	var order []string
	for _, e := range env.Entries(t, env.Shared.ID) {
		if e.Kind != journal.KindTurnStarted {
			continue
		}
		switch e.TurnID.UUID {
		case earlier.ID:
			order = append(order, "earlier")
		case later.ID:
			order = append(order, "later")
		}
	}
	if len(order) != 2 || order[0] != "earlier" || order[1] != "later" {
		t.Fatalf("turns started in the order %v, want [earlier later]", order)
	}
}
