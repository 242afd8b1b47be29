package callback_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// claimAndAdmit accepts a turn with no runner, claims it, and admits its
// run, returning the callback host the runtime would get.
func claimAndAdmit(t *testing.T, env *testkit.Env, r *runner.Runner, text string) (*lease.Claimed, runtime.Callbacks, runtime.Contract) {
	t.Helper()
	tt := env.Submit(t, env.Alice, env.Shared.ID, text)
	c, err := lease.NewStore(env.Client, env.Hub).Claim(context.Background(), lease.ClaimParams{TurnID: tt.ID, Owner: r.Owner(), TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	host, contract, err := r.Admit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return c, host, contract
}

// A callback presenting anything but the run's exact reference is
// rejected, never reconciled: a bundle with a different member,
// conversation, audience, agent or resource scope has another digest, and
// a stale lease token or another attempt is another run. Nothing of a
// rejected callback reaches the journal or the turn.
func TestCallbackWithMismatchedReferenceIsRejected(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	r := runner.New(runner.Config{Client: env.Client, Hub: env.Hub, Gateway: (&testkit.ScriptModel{}).Gateway()})
	c, host, contract := claimAndAdmit(t, env, r, "what is new?")
	var b authority.Bundle
	if err := json.Unmarshal(c.Turn.AuthorityBundle, &b); err != nil {
		t.Fatal(err)
	}
	digest := func(change func(*authority.Bundle)) string {
		m := b
		m.Manifest = authority.Manifest{Documents: append([]uuid.UUID(nil), b.Manifest.Documents...)}
		change(&m)
		d, _, err := m.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d == contract.Run.BundleDigest {
			t.Fatal("the changed bundle has the run's digest")
		}
		return d
	}
	good := contract.Run
	cases := map[string]runtime.RunRef{}
	for name, change := range map[string]func(*authority.Bundle){
		"member":       func(m *authority.Bundle) { m.MemberID = env.Bob.ID; m.Email = env.Bob.Email },
		"conversation": func(m *authority.Bundle) { m.ConversationID = uuid.New() },
		"audience":     func(m *authority.Bundle) { m.AudienceVersion++ },
		"agent":        func(m *authority.Bundle) { m.AgentVersionID = uuid.New() },
		"scope":        func(m *authority.Bundle) { m.Manifest.Documents = append(m.Manifest.Documents, uuid.New()) },
	} {
		ref := good
		ref.BundleDigest = digest(change)
		cases[name] = ref
	}
	stale := good
	stale.LeaseToken--
	cases["stale lease token"] = stale
	other := good
	other.Attempt++
	cases["another attempt"] = other
	otherTurn := good
	otherTurn.TurnID = uuid.NewString()
	cases["another turn"] = otherTurn

	ctx := context.Background()
	before := len(env.Entries(t, env.Shared.ID))
	for name, ref := range cases {
		calls := map[string]error{}
		_, calls["Model"] = host.Model(ctx, runtime.ModelRequest{Run: ref, Purpose: runtime.PurposeStep, Messages: []runtime.Message{contract.Message}}, nil)
		_, calls["Tool"] = host.Tool(ctx, runtime.ToolRequest{Run: ref, Call: runtime.ToolCall{ID: "x", Name: tools.HistorySearchName, Arguments: `{"query":"new"}`}})
		calls["Checkpoint"] = host.Checkpoint(ctx, runtime.Checkpoint{Run: ref})
		_, calls["Steering"] = host.Steering(ctx, ref)
		calls["Complete"] = host.Complete(ctx, runtime.Completion{Run: ref, Answer: "forged"})
		for call, err := range calls {
			if !errors.Is(err, callback.ErrRunMismatch) {
				t.Errorf("%s with a different %s: %v, want ErrRunMismatch", call, name, err)
			}
		}
	}
	if after := len(env.Entries(t, env.Shared.ID)); after != before {
		t.Fatalf("rejected callbacks wrote %d journal entries", after-before)
	}
	got, err := env.Client.Turn.Get(ctx, c.Turn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "running" || got.Answer != nil || len(got.Checkpoint) != 0 {
		t.Fatalf("rejected callbacks changed the turn: state %s, answer %v, checkpoint %s", got.State, got.Answer, got.Checkpoint)
	}
	// The run's own reference still works.
	if _, err := host.Tool(ctx, runtime.ToolRequest{Run: good, Call: runtime.ToolCall{ID: "y", Name: tools.HistorySearchName, Arguments: `{"query":"new"}`}}); err != nil {
		t.Fatalf("the run's own callback: %v", err)
	}
	if n := len(env.EntriesOf(t, env.Shared.ID, c.Turn.ID, journal.KindToolCompleted)); n != 1 {
		t.Fatalf("%d tool_completed entries, want 1", n)
	}
}
