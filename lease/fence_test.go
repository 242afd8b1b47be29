package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
)

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
			return lease.NewStore(env.Client, env.Hub).Terminal(ctx, lease.TerminalParams{Fence: old.Fence, State: "failed", Reason: outcome.ReasonInputLeaseLost})
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
