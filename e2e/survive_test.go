package e2e

// The rows of the seed's table "What survives what" that need a server:
// a closed browser, and forced loss of a replica (kill -9) with and
// without a client. The in-process rows are in runner/survive_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

// Row "Forced pod loss": the owner of a running turn is killed with
// kill -9. The old lease expires, recovery fences the run, and the turn
// completes on the other replica as a replacement attempt — at once after
// expiry when a client is watching, after one further lease period when
// none is. Either way: exactly one terminal.
func TestForcedLossKill9(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	for _, tt := range []struct {
		name   string
		client bool
	}{{"with a client", true}, {"without a client", false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			w := e2etest.NewWorld(t, bin, "turngate-kill9-")
			env := []string{"TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=150ms"}
			a := w.Start(t, "replica-a", env...)

			db := w.DB
			c := w.Client(t, a.Base, alice)
			room := servertest.Rooms(t, c)["Team room"]
			turnID := servertest.SubmitAs(t, ctx, c, room.ID, "survive a kill -9 of my runner", "kill9")
			// Wait until replica A is mid-answer, then bring up B and kill A.
			servertest.WaitFor(t, ctx, db, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
			b := w.Start(t, "replica-b", env...)
			a.Kill9(t)

			if tt.client {
				cb := w.Client(t, b.Base, alice)
				hdr := http.Header{"X-Turngate-Identity": cb.Header["X-Turngate-Identity"]}
				conn, err := gqlclient.Dial(ctx, b.Base+"/graphql", hdr, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := conn.Subscribe(ctx, "reload", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}}); err != nil {
					t.Fatal(err)
				}
			}
			if state := servertest.WaitTurnState(t, ctx, db, turnID); state != "completed" {
				t.Fatalf("turn ended %s, want completed", state)
			}
			var attempt, terminals, starts int
			var owner string
			if err := db.QueryRow(`SELECT attempt, (SELECT count(*) FROM journal_entries WHERE turn_id = t.id AND kind = 'turn_terminal'),
				(SELECT count(*) FROM journal_entries WHERE turn_id = t.id AND kind = 'turn_started'),
				(SELECT payload->>'runner' FROM journal_entries WHERE turn_id = t.id AND kind = 'turn_started' ORDER BY seq DESC LIMIT 1)
				FROM turns t WHERE id = $1`, turnID).Scan(&attempt, &terminals, &starts, &owner); err != nil {
				t.Fatal(err)
			}
			if attempt != 2 || terminals != 1 || starts != 2 || owner != "replica-b" {
				t.Fatalf("attempt=%d terminals=%d starts=%d last runner=%q; want a second attempt on replica-b and one terminal", attempt, terminals, starts, owner)
			}
		})
	}
}

// Row "Process paused past its lease" (SIGSTOP): the paused owner's
// lease expires, another replica takes the turn over, and when the
// paused one wakes it neither takes the turn back nor hands it on: one
// takeover costs one attempt, and the turn completes on attempt 2 with
// exactly two turn_started entries and one terminal.
func TestPausedOwnerTakeoverCostsOneAttempt(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := e2etest.NewWorld(t, bin, "turngate-sigstop-")
	env := []string{"TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=150ms"}
	a := w.Start(t, "replica-a", env...)
	c := w.Client(t, a.Base, alice)
	room := servertest.Rooms(t, c)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, c, room.ID, strings.Repeat("Tell me about paused processes and their leases. ", 4), "sigstop")
	servertest.WaitFor(t, ctx, w.DB, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	w.Start(t, "replica-b", env...)
	servertest.WaitFor(t, ctx, w.DB, `SELECT attempt = 2 AND lease_owner = 'replica-b' FROM turns WHERE id = $1`, turnID)
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, ctx, w.DB, `SELECT state <> 'running' FROM turns WHERE id = $1`, turnID)
	var state string
	var attempt, started, terminals int
	if err := w.DB.QueryRowContext(ctx, `SELECT state, attempt,
  (SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_started'),
  (SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_terminal')
FROM turns WHERE id = $1`, turnID).Scan(&state, &attempt, &started, &terminals); err != nil {
		t.Fatal(err)
	}
	if state != "completed" || attempt != 2 || started != 2 || terminals != 1 {
		t.Fatalf("turn %s on attempt %d with %d turn_started and %d terminals; want completed on attempt 2, 2 and 1", state, attempt, started, terminals)
	}
}

// Row "Orderly backend/runtime termination": SIGTERM stops new work; a run
// still going when the bounded drain ends is handed back at once, so
// another replica takes it over without waiting for the lease to expire
// (the lease here is far longer than the test's deadline).
func TestOrderlyTerminationHandsOver(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	w := e2etest.NewWorld(t, bin, "turngate-sigterm-")
	env := []string{"TURNGATE_LEASE_TTL=5m", "TURNGATE_MODEL_PACE=150ms", "TURNGATE_DRAIN=300ms"}
	a := w.Start(t, "replica-a", env...)
	db := w.DB
	c := w.Client(t, a.Base, alice)
	room := servertest.Rooms(t, c)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, c, room.ID, "finish me elsewhere", "sigterm")
	servertest.WaitFor(t, ctx, db, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
	w.Start(t, "replica-b", env...)
	if err := a.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.Cmd.Wait(); err != nil {
		t.Fatalf("replica-a exited with %v after SIGTERM", err)
	}
	if state := servertest.WaitTurnState(t, ctx, db, turnID); state != "completed" {
		t.Fatalf("turn ended %s, want completed", state)
	}
	var owner string
	var terminals int
	if err := db.QueryRow(`SELECT (SELECT payload->>'runner' FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_started' ORDER BY seq DESC LIMIT 1),
		(SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_terminal')`, turnID).Scan(&owner, &terminals); err != nil {
		t.Fatal(err)
	}
	if owner != "replica-b" || terminals != 1 {
		t.Fatalf("last run on %q with %d terminals; want replica-b and one terminal", owner, terminals)
	}
}

// Row "Orderly backend/runtime termination", for the streams: a replica
// told to stop (SIGTERM) ends its streams so that clients resume
// elsewhere rather than take them for finished — a WebSocket is closed
// with 1012 (service restart) and no complete for its subscription, an
// SSE subscription ends with a retryable UNAVAILABLE.
func TestOrderlyStopEndsStreamsForResume(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := e2etest.NewWorld(t, bin, "turngate-sigterm-streams-")
	a := w.Start(t, "replica-a", "TURNGATE_DRAIN=300ms")
	c := w.Client(t, a.Base, alice)
	room := servertest.Rooms(t, c)["Team room"]
	journal := gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}}

	raw := servertest.DialSubscribed(t, ctx, a.Base, c.Header, journal)
	sse, err := c.SSE(ctx, journal)
	if err != nil {
		t.Fatal(err)
	}
	// Both streams are open once an entry reaches them.
	servertest.SubmitAs(t, ctx, c, room.ID, "before the stop", "sigterm-streams")
	if m := raw.Read(ctx); m.Type != "next" {
		t.Fatalf("WebSocket got %s %s, want next", m.Type, m.Payload)
	}
	if r, ok := <-sse; !ok || r.Err() != nil {
		t.Fatalf("SSE got %+v", r)
	}

	if err := a.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := raw.WS.Read(ctx)
		if err == nil {
			var m gqlclient.Message
			if json.Unmarshal(data, &m) == nil && m.Type == "complete" {
				t.Fatalf("the stopping replica completed the subscription: %s", data)
			}
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 1012 {
			t.Fatalf("WebSocket ended with %v, want close 1012", err)
		}
		break
	}
	var last gqlclient.Response
	for r := range sse {
		last = r
	}
	if code := gqlclient.CodeOf(last.Err()); code != "UNAVAILABLE" {
		t.Fatalf("SSE ended with %+v, want UNAVAILABLE", last)
	}
}
