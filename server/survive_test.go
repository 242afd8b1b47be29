package server_test

// The rows of the seed's table "What survives what" that need a server:
// a closed browser, and forced loss of a replica (kill -9) with and
// without a client. The in-process rows are in turn/survive_test.go.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// Row "Browser tab closed": closing every subscription of a room mid-turn
// changes nothing; the turn completes and a later subscriber replays it.
func TestBrowserClosedCancelsNothing(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 10 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := h.Client(t, alice)
	room := rooms(t, c)["Team room"]
	conn := h.Dial(t, ctx, c)
	msgs, err := conn.Subscribe(ctx, "tab", gqlclient.Request{Query: journalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}})
	if err != nil {
		t.Fatal(err)
	}
	turnID := submitAs(t, ctx, c, room.ID, "keep going without me", "closed-tab")
	for nextJournal[wireEntry](t, ctx, msgs).Kind != "TURN_STARTED" {
	}
	conn.Close() // the only tab closes mid-turn

	final := waitTurnState(t, ctx, h.DB, turnID)
	if final != "completed" {
		t.Fatalf("turn ended %s after the tab closed, want completed", final)
	}
	conn2 := h.Dial(t, ctx, c)
	defer conn2.Close()
	msgs2, err := conn2.Subscribe(ctx, "reload", gqlclient.Request{Query: journalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for {
		e := nextJournal[wireEntry](t, ctx, msgs2)
		seen[e.Kind]++
		if e.Kind == "TURN_TERMINAL" {
			break
		}
	}
	if seen["TURN_ACCEPTED"] != 1 || seen["TURN_ANSWER"] != 1 || seen["ANSWER_DELTA"] == 0 {
		t.Fatalf("replay after reload: %v", seen)
	}
}

// waitTurnState polls the turn until it is terminal, with ctx's deadline.
func waitTurnState(t *testing.T, ctx context.Context, db *sql.DB, id string) string {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var state string
		if err := db.QueryRowContext(ctx, `SELECT state FROM turns WHERE id = $1`, id).Scan(&state); err != nil {
			t.Fatalf("turn %s: %v", id, err)
		}
		if state != "queued" && state != "running" {
			return state
		}
		select {
		case <-ctx.Done():
			t.Fatalf("turn %s still %s at the deadline", id, state)
		case <-tick.C:
		}
	}
}

// replica is one real turngate process against a shared database.
type replica struct {
	stopOnce sync.Once
	name     string
	cmd      *exec.Cmd
	base     string
	out      io.Closer
}

func startReplica(t testing.TB, bin, name, dbURL, dataDir string, env ...string) *replica {
	t.Helper()
	r, err := tryStartReplica(t, bin, name, dbURL, dataDir, env...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryStartReplica starts a replica and waits for its address; it may run
// on a goroutine other than the test's (the chaos monkey restarts them).
func tryStartReplica(t testing.TB, bin, name, dbURL, dataDir string, env ...string) (*replica, error) {
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = append(cleanEnv(), append([]string{
		"DATABASE_URL=" + dbURL, "TURNGATE_DATA=" + dataDir, "TURNGATE_REPLICA=" + name,
		"TURNGATE_DEMO=true",
	}, env...)...)
	r, w := io.Pipe()
	cmd.Stdout = w
	cmd.Stderr = &prefixWriter{t: t, prefix: name + ": "}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rep := &replica{name: name, cmd: cmd, out: w}
	t.Cleanup(func() {
		rep.stop()
		w.Close()
	})
	base, err := readAddress(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rep.base = base
	return rep, nil
}

// kill9 kills the replica with SIGKILL and reaps it. Safe on any goroutine.
func (r *replica) kill9(t testing.TB) {
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("kill -9 %s: %v", r.name, err)
	}
	r.stop()
}

// stop kills the replica if it still runs and reaps it; safe to call twice.
func (r *replica) stop() {
	r.stopOnce.Do(func() {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	})
}

// Row "Forced pod loss": the owner of a running turn is killed with
// kill -9. The old lease expires, recovery fences the run, and the turn
// completes on the other replica as a replacement attempt — at once after
// expiry when a client is watching, after one further lease period when
// none is. Either way: exactly one terminal.
func TestForcedLossKill9(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, tt := range []struct {
		name   string
		client bool
	}{{"with a client", true}, {"without a client", false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			w := newProcessWorld(t, bin, "turngate-kill9-")
			env := []string{"TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=150ms"}
			a := w.start(t, "replica-a", env...)

			db := w.db
			c := w.client(t, a.base, alice)
			room := rooms(t, c)["Team room"]
			turnID := submitAs(t, ctx, c, room.ID, "survive a kill -9 of my runner", "kill9")
			// Wait until replica A is mid-answer, then bring up B and kill A.
			waitFor(t, ctx, db, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
			b := w.start(t, "replica-b", env...)
			a.kill9(t)

			if tt.client {
				cb := w.client(t, b.base, alice)
				hdr := http.Header{"X-Turngate-Identity": cb.Header["X-Turngate-Identity"]}
				conn, err := gqlclient.Dial(ctx, b.base+"/graphql", hdr, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := conn.Subscribe(ctx, "reload", gqlclient.Request{Query: journalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}}); err != nil {
					t.Fatal(err)
				}
			}
			if state := waitTurnState(t, ctx, db, turnID); state != "completed" {
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

// clientFor is a GraphQL client on base carrying email's envelope, minted
// by `turngate token` from the replicas' shared data folder.
func clientFor(t *testing.T, bin, base, dataDir, email string) *gqlclient.Client {
	t.Helper()
	tok, err := tokenFor(bin, dataDir, email)
	if err != nil {
		t.Fatal(err)
	}
	return &gqlclient.Client{URL: base + "/graphql", Header: http.Header{"X-Turngate-Identity": {tok}}, HTTP: servertest.HTTPClient}
}

func tokenFor(bin, dataDir, email string) (string, error) {
	cmd := exec.Command(bin, "token", "--email", email)
	cmd.Env = append(cleanEnv(), "TURNGATE_DATA="+dataDir)
	tok, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("turngate token: %w", err)
	}
	return strings.TrimSpace(string(tok)), nil
}

// waitFor polls a boolean query until it is true, with ctx's deadline.
func waitFor(t testing.TB, ctx context.Context, db *sql.DB, query string, args ...any) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var ok bool
		if err := db.QueryRowContext(ctx, query, args...).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("condition never held: %s", query)
		case <-tick.C:
		}
	}
}

// Row "Process paused past its lease" (SIGSTOP): the paused owner's
// lease expires, another replica takes the turn over, and when the
// paused one wakes it neither takes the turn back nor hands it on: one
// takeover costs one attempt, and the turn completes on attempt 2 with
// exactly two turn_started entries and one terminal.
func TestPausedOwnerTakeoverCostsOneAttempt(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newProcessWorld(t, bin, "turngate-sigstop-")
	env := []string{"TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=150ms"}
	a := w.start(t, "replica-a", env...)
	c := w.client(t, a.base, alice)
	room := rooms(t, c)["Team room"]
	turnID := submitAs(t, ctx, c, room.ID, strings.Repeat("Tell me about paused processes and their leases. ", 4), "sigstop")
	waitFor(t, ctx, w.db, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	w.start(t, "replica-b", env...)
	waitFor(t, ctx, w.db, `SELECT attempt = 2 AND lease_owner = 'replica-b' FROM turns WHERE id = $1`, turnID)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, w.db, `SELECT state <> 'running' FROM turns WHERE id = $1`, turnID)
	var state string
	var attempt, started, terminals int
	if err := w.db.QueryRowContext(ctx, `SELECT state, attempt,
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
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	w := newProcessWorld(t, bin, "turngate-sigterm-")
	env := []string{"TURNGATE_LEASE_TTL=5m", "TURNGATE_MODEL_PACE=150ms", "TURNGATE_DRAIN=300ms"}
	a := w.start(t, "replica-a", env...)
	db := w.db
	c := w.client(t, a.base, alice)
	room := rooms(t, c)["Team room"]
	turnID := submitAs(t, ctx, c, room.ID, "finish me elsewhere", "sigterm")
	waitFor(t, ctx, db, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
	w.start(t, "replica-b", env...)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("replica-a exited with %v after SIGTERM", err)
	}
	if state := waitTurnState(t, ctx, db, turnID); state != "completed" {
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

// resumeTurn: a current member's explicit request recovers a run whose
// lease has expired, at once; a live lease is left alone; anyone else gets
// NOT_FOUND and changes nothing.
func TestResumeTurnMutation(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 20 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := h.Client(t, alice)
	room := rooms(t, c)["Team room"]
	turnID := submitAs(t, ctx, c, room.ID, "resume me", "resume-1")
	id := turnID
	waitFor(t, ctx, h.DB, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, id)
	// Another runner "claims" the turn and dies at once: the token moves
	// on (fencing this server's run) and the lease has a minute to live.
	if _, err := h.DB.Exec(`UPDATE turns SET lease_token = lease_token + 1, lease_owner = 'gone',
		lease_expires_at = now() + interval '1 minute' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}

	resume := `mutation($t: ID!) { resumeTurn(input: {turnId: $t}) { state attempt } }`
	var out struct {
		ResumeTurn struct {
			State   string
			Attempt int
		} `json:"resumeTurn"`
	}
	// Live lease: returned as it is.
	if err := c.Do(ctx, resume, map[string]any{"t": id}, &out); err != nil || out.ResumeTurn.State != "RUNNING" || out.ResumeTurn.Attempt != 1 {
		t.Fatalf("resume of a live run: %+v, %v", out, err)
	}
	if err := h.Client(t, mallory).Do(ctx, resume, map[string]any{"t": id}, nil); gqlclient.CodeOf(err) != "NOT_FOUND" {
		t.Fatalf("resume by a non-member: %v, want NOT_FOUND", err)
	}
	if _, err := h.DB.Exec(`UPDATE turns SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, resume, map[string]any{"t": id}, &out); err != nil || out.ResumeTurn.Attempt != 2 {
		t.Fatalf("resume of an expired run: %+v, %v", out, err)
	}
	if state := waitTurnState(t, ctx, h.DB, id); state != "completed" {
		t.Fatalf("resumed turn ended %s", state)
	}
	var terminals int
	if err := h.DB.QueryRow(`SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_terminal'`, id).Scan(&terminals); err != nil || terminals != 1 {
		t.Fatalf("%d terminals (%v), want 1", terminals, err)
	}
}

// Row "Orderly backend/runtime termination", for the streams: a replica
// told to stop (SIGTERM) ends its streams so that clients resume
// elsewhere rather than take them for finished — a WebSocket is closed
// with 1012 (service restart) and no complete for its subscription, an
// SSE subscription ends with a retryable UNAVAILABLE.
func TestOrderlyStopEndsStreamsForResume(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := newProcessWorld(t, bin, "turngate-sigterm-streams-")
	a := w.start(t, "replica-a", "TURNGATE_DRAIN=300ms")
	c := w.client(t, a.base, alice)
	room := rooms(t, c)["Team room"]
	journal := gqlclient.Request{Query: journalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}}

	raw := dialSubscribed(t, ctx, a.base, c.Header, journal)
	sse, err := c.SSE(ctx, journal)
	if err != nil {
		t.Fatal(err)
	}
	// Both streams are open once an entry reaches them.
	submitAs(t, ctx, c, room.ID, "before the stop", "sigterm-streams")
	if m := raw.read(ctx); m.Type != "next" {
		t.Fatalf("WebSocket got %s %s, want next", m.Type, m.Payload)
	}
	if r, ok := <-sse; !ok || r.Err() != nil {
		t.Fatalf("SSE got %+v", r)
	}

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := raw.ws.Read(ctx)
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
