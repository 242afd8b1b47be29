package server_test

import (
	"context"
	"testing"
	"time"

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
	room := servertest.Rooms(t, c)["Team room"]
	conn := h.Dial(t, ctx, c)
	msgs, err := conn.Subscribe(ctx, "tab", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}})
	if err != nil {
		t.Fatal(err)
	}
	turnID := servertest.SubmitAs(t, ctx, c, room.ID, "keep going without me", "closed-tab")
	for servertest.NextJournal[servertest.WireEntry](t, ctx, msgs).Kind != "TURN_STARTED" {
	}
	conn.Close() // the only tab closes mid-turn

	final := servertest.WaitTurnState(t, ctx, h.DB, turnID)
	if final != "completed" {
		t.Fatalf("turn ended %s after the tab closed, want completed", final)
	}
	conn2 := h.Dial(t, ctx, c)
	defer conn2.Close()
	msgs2, err := conn2.Subscribe(ctx, "reload", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for {
		e := servertest.NextJournal[servertest.WireEntry](t, ctx, msgs2)
		seen[e.Kind]++
		if e.Kind == "TURN_TERMINAL" {
			break
		}
	}
	if seen["TURN_ACCEPTED"] != 1 || seen["TURN_ANSWER"] != 1 || seen["ANSWER_DELTA"] == 0 {
		t.Fatalf("replay after reload: %v", seen)
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
	room := servertest.Rooms(t, c)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, c, room.ID, "resume me", "resume-1")
	id := turnID
	servertest.WaitFor(t, ctx, h.DB, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, id)
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
	if state := servertest.WaitTurnState(t, ctx, h.DB, id); state != "completed" {
		t.Fatalf("resumed turn ended %s", state)
	}
	var terminals int
	if err := h.DB.QueryRow(`SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_terminal'`, id).Scan(&terminals); err != nil || terminals != 1 {
		t.Fatalf("%d terminals (%v), want 1", terminals, err)
	}
}
