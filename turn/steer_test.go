package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	entcommand "github.com/turngate/turngate/ent/command"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// heldStep holds the first model step until release, then answers it
// with res (or fails with fail, when set); later steps answer like the
// builtin model.
func heldStep(started chan<- struct{}, release <-chan struct{}, res *gateway.Result, fail error) func(context.Context, int, gateway.Request) (*gateway.Result, error) {
	return func(ctx context.Context, n int, req gateway.Request) (*gateway.Result, error) {
		if n != 1 {
			return nil, nil
		}
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fail != nil {
			return nil, fail
		}
		return res, nil
	}
}

// heldFirstStep holds the first model step until release, then asks for
// a search; later steps answer like the builtin model.
func heldFirstStep(started chan<- struct{}, release <-chan struct{}) func(context.Context, int, gateway.Request) (*gateway.Result, error) {
	return heldStep(started, release, &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
		{ID: "call_1", Name: tools.HistorySearchName, Arguments: `{"query":"news"}`}}}, nil)
}

// A steer retried with one command id is stored once and delivered once,
// at the next step boundary, by whichever of two replicas owns the run.
func TestSteerIsDeliveredOnceAcrossRetriesAndReplicas(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	started, release := make(chan struct{}, 2), make(chan struct{})
	model := &testkit.ScriptModel{Script: heldFirstStep(started, release)}
	env.Runner(t, runner.Config{Gateway: model.Gateway(), Owner: "replica-a"})
	env.Runner(t, runner.Config{Gateway: model.Gateway(), Owner: "replica-b"})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "what is new?")
	<-started

	ctx := context.Background()
	id := uuid.New()
	for range 3 {
		cmd, err := env.Turns.Steer(ctx, env.Alice, id, tt.ID, "answer in one line")
		if err != nil || cmd.ID != id {
			t.Fatalf("steer = %v, %v", cmd, err)
		}
	}
	if _, err := env.Turns.Steer(ctx, env.Alice, id, tt.ID, "something else"); codeOf(err) != string(errcode.Conflict) {
		t.Fatalf("reusing the command id for other text = %v, want CONFLICT", err)
	}
	close(release)
	done := env.WaitTerminal(t, tt.ID)
	if done.State != "completed" {
		t.Fatalf("turn ended %s", done.State)
	}
	delivered := env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindSteerDelivered)
	if len(delivered) != 1 {
		t.Fatalf("%d steer_delivered entries, want 1", len(delivered))
	}
	var p journal.SteerDeliveredPayload
	if err := json.Unmarshal(delivered[0].Payload, &p); err != nil || p.CommandID != id || p.ActorID != env.Alice.ID {
		t.Fatalf("steer_delivered = %+v (%v)", p, err)
	}
	// Delivered at the boundary after the first step: the second step
	// carries it, once; the first could not.
	reqs := model.Requests()
	if strings.Contains(runtime.Transcript(toRuntime(reqs[0].Messages)), "one line") {
		t.Fatal("the first step saw the steering before its boundary")
	}
	if n := strings.Count(runtime.Transcript(toRuntime(reqs[len(reqs)-1].Messages)), "answer in one line"); n != 1 {
		t.Fatalf("the last step carries the steering %d times, want 1", n)
	}
	cmd, err := env.Client.Command.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.State != entcommand.StateDelivered || cmd.DeliveredLeaseToken == nil || *cmd.DeliveredLeaseToken != done.LeaseToken {
		t.Fatalf("command = %s, token %v; want delivered by the run's lease %d", cmd.State, cmd.DeliveredLeaseToken, done.LeaseToken)
	}
}

func toRuntime(msgs []gateway.Message) []runtime.Message {
	out := make([]runtime.Message, len(msgs))
	for i, m := range msgs {
		out[i] = runtime.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

func TestSteerRefusals(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	// No runner: turns stay queued.
	alices := env.Submit(t, env.Alice, env.Shared.ID, "queued")
	bobs := env.Submit(t, env.Bob, env.Shared.ID, "queued too")
	private := env.Submit(t, env.Alice, env.Private(t, env.Alice).ID, "mine")
	mallory := env.NewMember(t, "mallory@example.com")

	for _, tc := range []struct {
		name  string
		actor func() error
		want  errcode.Code
	}{
		{"a room member who is neither author nor owner", func() error {
			_, err := env.Turns.Steer(ctx, env.Bob, uuid.New(), alices.ID, "x")
			return err
		}, errcode.Forbidden},
		{"a non-member", func() error {
			_, err := env.Turns.Steer(ctx, mallory, uuid.New(), alices.ID, "x")
			return err
		}, errcode.NotFound},
		{"someone else's private turn", func() error {
			_, err := env.Turns.Steer(ctx, env.Bob, uuid.New(), private.ID, "x")
			return err
		}, errcode.NotFound},
		{"empty text", func() error {
			_, err := env.Turns.Steer(ctx, env.Alice, uuid.New(), alices.ID, "")
			return err
		}, errcode.BadUserInput},
		{"an unknown turn", func() error {
			_, err := env.Turns.Steer(ctx, env.Alice, uuid.New(), uuid.New(), "x")
			return err
		}, errcode.NotFound},
	} {
		if got := codeOf(tc.actor()); got != string(tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	var stored int
	if err := env.DB.QueryRow(`SELECT count(*) FROM commands`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("refused steers stored %d commands (%v)", stored, err)
	}
	// The shared room's owner may steer another member's turn.
	pending := uuid.New()
	if _, err := env.Turns.Steer(ctx, env.Alice, pending, bobs.ID, "shorter please"); err != nil {
		t.Fatalf("the owner steering a member's turn: %v", err)
	}
	// A steer that no step boundary reached is rejected with the terminal;
	// a finished turn can no longer be steered.
	if _, err := env.Turns.Cancel(ctx, env.Bob, uuid.New(), bobs.ID); err != nil {
		t.Fatal(err)
	}
	if cmd, _ := env.Client.Command.Get(ctx, pending); cmd.State != entcommand.StateRejected {
		t.Fatalf("steer pending when its turn ended is %s, want rejected", cmd.State)
	}
	if _, err := env.Turns.Steer(ctx, env.Bob, uuid.New(), bobs.ID, "too late"); codeOf(err) != string(errcode.Conflict) {
		t.Fatalf("steering a finished turn = %v, want CONFLICT", err)
	}
}

// heldAnswer holds the first model step — a plain answer, the run's
// last step — until release; later steps answer like the builtin model.
func heldAnswer(started chan<- struct{}, release <-chan struct{}, fail error) func(context.Context, int, gateway.Request) (*gateway.Result, error) {
	return heldStep(started, release, &gateway.Result{Text: "A first answer.", FinishReason: "stop"}, fail)
}

// steerTheHeldAnswer runs one turn whose first model step (its answer)
// is held while alice steers it, then released — failing with fail when
// set — and returns the turn, the steer's command id, the model and the
// ended turn.
func steerTheHeldAnswer(t *testing.T, env *testkit.Env, fail error) (*ent.Turn, uuid.UUID, *testkit.ScriptModel, *ent.Turn) {
	t.Helper()
	started, release := make(chan struct{}, 1), make(chan struct{})
	model := &testkit.ScriptModel{Script: heldAnswer(started, release, fail)}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	tt := env.Submit(t, env.Alice, env.Shared.ID, "what is new?")
	<-started
	id := uuid.New()
	if _, err := env.Turns.Steer(context.Background(), env.Alice, id, tt.ID, "answer in one line"); err != nil {
		t.Fatal(err)
	}
	close(release)
	return tt, id, model, env.WaitTerminal(t, tt.ID)
}

// A steer sent while the run's only model step is streaming its answer
// is delivered: one more step follows with the steering in it
// (steer_delivered in the journal), and the turn completes with that
// step's answer. Both controllers.
func TestSteerDuringTheLastStepIsDelivered(t *testing.T) {
	t.Parallel()
	for _, controller := range []string{"react", "single"} {
		t.Run(controller, func(t *testing.T) {
			t.Parallel()
			env := testkit.New(t)
			env.Agent(t, controller, nil, nil)
			ctx := context.Background()
			tt, id, model, done := steerTheHeldAnswer(t, env, nil)
			if done.State != "completed" {
				t.Fatalf("turn ended %s", done.State)
			}
			if n := len(env.EntriesOf(t, env.Shared.ID, tt.ID, journal.KindSteerDelivered)); n != 1 {
				t.Fatalf("%d steer_delivered entries, want 1", n)
			}
			reqs := model.Requests()
			if len(reqs) != 2 || !strings.Contains(runtime.Transcript(toRuntime(reqs[1].Messages)), "answer in one line") {
				t.Fatalf("%d model steps; the last carries the steering: %v", len(reqs), len(reqs) == 2)
			}
			cmd, err := env.Client.Command.Get(ctx, id)
			if err != nil || cmd.State != entcommand.StateDelivered {
				t.Fatalf("command = %v, %v; want delivered", cmd, err)
			}
		})
	}
}

// A steer the run cannot deliver — its last step fails, and no step
// boundary comes — ends rejected, and the journal says so before the
// terminal, with the reason and the command, for the steerer to see.
func TestUndeliveredSteerIsRejectedInTheJournal(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tt, id, _, done := steerTheHeldAnswer(t, env, errors.New("the model went away"))
	if done.State != "failed" {
		t.Fatalf("turn ended %s, want failed", done.State)
	}
	cmd, err := env.Client.Command.Get(ctx, id)
	if err != nil || cmd.State != entcommand.StateRejected {
		t.Fatalf("command = %v, %v; want rejected", cmd, err)
	}
	var kinds []journal.Kind
	var rejected journal.SteerRejectedPayload
	for _, e := range env.Entries(t, env.Shared.ID) {
		if !e.TurnID.Valid || e.TurnID.UUID != tt.ID {
			continue
		}
		kinds = append(kinds, e.Kind)
		if e.Kind == journal.KindSteerRejected {
			if err := json.Unmarshal(e.Payload, &rejected); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := len(kinds)
	if n < 2 || kinds[n-2] != journal.KindSteerRejected || kinds[n-1] != journal.KindTurnTerminal {
		t.Fatalf("the turn's entries end %v; want steer_rejected, then turn_terminal", kinds)
	}
	if rejected.CommandID != id || rejected.ActorID != env.Alice.ID || rejected.Reason == "" {
		t.Fatalf("steer_rejected = %+v", rejected)
	}
}
