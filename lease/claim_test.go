package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
)

// TestClaimAccepted: the accept-time claim, run in a transaction that
// holds the room's row lock as acceptance does, claims a turn only when
// no earlier turn of the room is queued or running and the room has no
// active turn. Refused, it changes nothing and leaves the transaction
// usable, so the acceptance commits with its turn queued.
func TestClaimAccepted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before puts the room's lane in its state ahead of the turn.
		before func(t *testing.T, env *testkit.Env, store *lease.Store)
		want   error
	}{
		{"idle lane", func(*testing.T, *testkit.Env, *lease.Store) {}, nil},
		{"behind a queued turn", func(t *testing.T, env *testkit.Env, _ *lease.Store) {
			env.Submit(t, env.Alice, env.Shared.ID, "earlier, queued")
		}, lease.ErrNotClaimable},
		{"behind a running turn", func(t *testing.T, env *testkit.Env, store *lease.Store) {
			earlier := env.Submit(t, env.Alice, env.Shared.ID, "earlier, running")
			if _, err := store.Claim(context.Background(), lease.ClaimParams{TurnID: earlier.ID, Owner: "other", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}, lease.ErrNotClaimable},
		{"behind an ended turn", func(t *testing.T, env *testkit.Env, _ *lease.Store) {
			earlier := env.Submit(t, env.Alice, env.Shared.ID, "earlier, ended")
			if _, err := env.Turns.Cancel(context.Background(), env.Alice, uuid.New(), earlier.ID); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := testkit.New(t)
			ctx := context.Background()
			store := lease.NewStore(env.Client, env.Hub)
			tt.before(t, env, store)
			accepted := env.Submit(t, env.Bob, env.Shared.ID, "the accepted turn")

			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, env.Shared.ID); err != nil {
				t.Fatal(err)
			}
			c, err := store.ClaimAccepted(ctx, tx, lease.ClaimAcceptedParams{Turn: accepted, AgentVersion: 1, Owner: "acceptor", TTL: time.Minute})
			if !errors.Is(err, tt.want) {
				t.Fatalf("claim at acceptance: %v, want %v", err, tt.want)
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit after the claim: %v", err)
			}

			got, err := env.Client.Turn.Get(ctx, accepted.ID)
			if err != nil {
				t.Fatal(err)
			}
			active := activeTurn(t, env)
			started := startedTurns(t, env)
			if tt.want != nil {
				if got.State != "queued" || got.LeaseToken != accepted.LeaseToken || got.Attempt != 0 {
					t.Fatalf("refused, the turn is %s with token %d, attempt %d", got.State, got.LeaseToken, got.Attempt)
				}
				if active.Valid && active.UUID == accepted.ID {
					t.Fatal("refused, the room names the turn active")
				}
				for _, id := range started {
					if id == accepted.ID {
						t.Fatal("refused, the turn has a turn_started entry")
					}
				}
				return
			}
			if got.State != "running" || c == nil || c.Fence.LeaseToken != got.LeaseToken {
				t.Fatalf("claimed, the turn is %s with token %d (claim %+v)", got.State, got.LeaseToken, c)
			}
			if !active.Valid || active.UUID != accepted.ID {
				t.Fatalf("claimed, the room's active turn is %v", active)
			}
			if len(started) == 0 || started[len(started)-1] != accepted.ID {
				t.Fatalf("claimed, turn_started entries for %v", started)
			}
		})
	}
}

func activeTurn(t *testing.T, env *testkit.Env) uuid.NullUUID {
	t.Helper()
	var id uuid.NullUUID
	if err := env.DB.QueryRow(`SELECT active_turn_id FROM conversations WHERE id = $1`, env.Shared.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func startedTurns(t *testing.T, env *testkit.Env) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for _, e := range env.Entries(t, env.Shared.ID) {
		if e.Kind == journal.KindTurnStarted {
			ids = append(ids, e.TurnID.UUID)
		}
	}
	return ids
}
