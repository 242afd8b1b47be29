package callback_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	entcommand "github.com/turngate/turngate/ent/command"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// Only the run holding the turn's current lease claims steering: a run
// that lost the turn claims nothing and the command waits for the new
// owner. A steer delivered to an attempt that then died reaches the
// replacement attempt through its contract, without a second delivery.
func TestOnlyTheFencedOwnerDeliversSteering(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	r := runner.New(runner.Config{Client: env.Client, Hub: env.Hub, Gateway: (&testkit.ScriptModel{}).Gateway()})
	ctx := context.Background()
	c1, host1, contract1 := claimAndAdmit(t, env, r, "what is new?")
	id := uuid.New()
	if _, err := env.Turns.Steer(ctx, env.Alice, id, c1.Turn.ID, "be brief"); err != nil {
		t.Fatal(err)
	}
	reclaim := func(c *lease.Claimed) (*lease.Claimed, runtime.Callbacks, runtime.Contract) {
		if err := lease.NewStore(env.Client, env.Hub).Release(ctx, lease.ReleaseParams{Fence: c.Fence}); err != nil {
			t.Fatal(err)
		}
		next, err := lease.NewStore(env.Client, env.Hub).Claim(ctx, lease.ClaimParams{TurnID: c.Turn.ID, Owner: "replica-b", TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		h, contract, err := r.Admit(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		return next, h, contract
	}
	c2, host2, contract2 := reclaim(c1)
	if _, err := host1.Steering(ctx, contract1.Run); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("steering claimed by a run that lost the turn: %v", err)
	}
	if cmd, _ := env.Client.Command.Get(ctx, id); cmd.State != entcommand.StatePending {
		t.Fatalf("after the stale claim the command is %s, want pending", cmd.State)
	}
	steers, err := host2.Steering(ctx, contract2.Run)
	if err != nil || len(steers) != 1 || steers[0].ID != id.String() || steers[0].Text != "be brief" {
		t.Fatalf("owner's steering = %+v, %v", steers, err)
	}
	if again, err := host2.Steering(ctx, contract2.Run); err != nil || len(again) != 0 {
		t.Fatalf("second claim = %+v, %v; want nothing", again, err)
	}
	// The owner dies before checkpointing it: the next attempt gets the
	// steer in its contract, and the journal still holds one delivery.
	_, _, contract3 := reclaim(c2)
	if len(contract3.Steering) != 1 || contract3.Steering[0].ID != id.String() {
		t.Fatalf("replacement contract steering = %+v", contract3.Steering)
	}
	if n := len(env.EntriesOf(t, env.Shared.ID, c1.Turn.ID, journal.KindSteerDelivered)); n != 1 {
		t.Fatalf("%d steer_delivered entries, want 1", n)
	}
}
