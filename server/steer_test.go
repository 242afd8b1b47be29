package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
	"github.com/turngate/turngate/turn"
)

const steerMutation = `mutation($c: ID!, $t: ID!, $x: String!) {
  steerTurn(input: {commandId: $c, turnId: $t, text: $x}) { commandId state turn { id state } }
}`

// steerResult is steerTurn's answer as the tests select it.
type steerResult struct {
	SteerTurn struct {
		CommandID string `json:"commandId"`
		State     string `json:"state"`
		Turn      struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"turn"`
	} `json:"steerTurn"`
}

// steerAs runs steerTurn as c.
func steerAs(ctx context.Context, c *gqlclient.Client, cmd, turnID, text string) (steerResult, error) {
	var out steerResult
	err := c.Do(ctx, steerMutation, map[string]any{"c": cmd, "t": turnID, "x": text}, &out)
	return out, err
}

// commandRows counts the stored member commands.
func commandRows(t *testing.T, h *servertest.Harness) int64 {
	t.Helper()
	var n int64
	if err := h.DB.QueryRow(`SELECT count(*) FROM commands`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSteerTurnMutation: steerTurn over GraphQL on a queued turn — bad
// input, a member who is neither the author nor the shared room's owner,
// and a non-member are refused with their codes and write nothing; the
// author's steer is stored PENDING, a retry converges on it, the same
// command id with other text is a CONFLICT, the shared room's owner may
// steer another member's turn, and once the turn has ended steering it is
// a CONFLICT. An unended turn's usage is null.
func TestSteerTurnMutation(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true }) // turns stay queued
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"].ID
	aliceTurn := servertest.SubmitAs(t, ctx, a, team, "steer me", "steer-1")
	const cmd = "5b0e7c4e-2f1d-4a8b-9c3e-6d7f8a9b0c1d"

	tests := []struct {
		name   string
		client *gqlclient.Client
		vars   map[string]any
		code   string
	}{
		{"malformed command id", a, map[string]any{"c": "not-a-uuid", "t": aliceTurn, "x": "shorter"}, "BAD_USER_INPUT"},
		{"empty command id", a, map[string]any{"c": "", "t": aliceTurn, "x": "shorter"}, "BAD_USER_INPUT"},
		{"malformed turn id", a, map[string]any{"c": cmd, "t": "nope", "x": "shorter"}, "BAD_USER_INPUT"},
		{"empty text", a, map[string]any{"c": cmd, "t": aliceTurn, "x": ""}, "BAD_USER_INPUT"},
		{"blank text", a, map[string]any{"c": cmd, "t": aliceTurn, "x": " \n\t "}, "BAD_USER_INPUT"},
		{"text too long", a, map[string]any{"c": cmd, "t": aliceTurn, "x": strings.Repeat("x", turn.MaxSteerText+1)}, "BAD_USER_INPUT"},
		{"text too long in bytes", a, map[string]any{"c": cmd, "t": aliceTurn, "x": strings.Repeat("é", turn.MaxSteerText/2+1)}, "BAD_USER_INPUT"},
		{"neither author nor owner", b, map[string]any{"c": cmd, "t": aliceTurn, "x": "shorter"}, "FORBIDDEN"},
		{"not a member", h.Client(t, mallory), map[string]any{"c": cmd, "t": aliceTurn, "x": "shorter"}, "NOT_FOUND"},
		{"no such turn", a, map[string]any{"c": cmd, "t": uuid.NewString(), "x": "shorter"}, "NOT_FOUND"},
		{"no envelope", h.ClientWithToken(""), map[string]any{"c": cmd, "t": aliceTurn, "x": "shorter"}, "UNAUTHENTICATED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, cmds := counts(t, h), commandRows(t, h)
			err := tt.client.Do(ctx, steerMutation, tt.vars, nil)
			if code := gqlclient.CodeOf(err); code != tt.code {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
			if after := counts(t, h); after != before {
				t.Fatalf("database changed: before %+v, after %+v", before, after)
			}
			if n := commandRows(t, h); n != cmds {
				t.Fatalf("%d commands after the refusal, want %d", n, cmds)
			}
		})
	}

	// The author's steer is stored, pending the run's first step boundary;
	// retries converge on the one command.
	for i := range 2 {
		out, err := steerAs(ctx, a, cmd, aliceTurn, "shorter, please")
		if err != nil {
			t.Fatalf("steer (try %d): %v", i+1, err)
		}
		if s := out.SteerTurn; s.CommandID != cmd || s.State != "PENDING" || s.Turn.ID != aliceTurn || s.Turn.State != "QUEUED" {
			t.Fatalf("steer (try %d): %+v, want command %s PENDING on the QUEUED turn %s", i+1, s, cmd, aliceTurn)
		}
	}
	var rows int
	var kind, text, state string
	if err := h.DB.QueryRow(`SELECT count(*), min(kind::text), min(text), min(state::text) FROM commands WHERE id = $1`, cmd).Scan(&rows, &kind, &text, &state); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || kind != "steer" || text != "shorter, please" || state != "pending" {
		t.Fatalf("stored command: %d rows, kind %s, text %q, state %s; want one pending steer", rows, kind, text, state)
	}

	// The same command id with other text, or for another turn, is a
	// CONFLICT and changes nothing.
	bobTurn := servertest.SubmitAs(t, ctx, b, team, "bob's turn", "steer-2")
	for _, tt := range []struct{ name, turnID, text string }{
		{"other text", aliceTurn, "longer, please"},
		{"other turn", bobTurn, "shorter, please"},
	} {
		cmds := commandRows(t, h)
		if _, err := steerAs(ctx, a, cmd, tt.turnID, tt.text); gqlclient.CodeOf(err) != "CONFLICT" {
			t.Fatalf("same command id, %s: err = %v, want CONFLICT", tt.name, err)
		}
		if n := commandRows(t, h); n != cmds {
			t.Fatalf("same command id, %s: %d commands, want %d", tt.name, n, cmds)
		}
	}

	// The owner of a shared room may steer another member's turn.
	ownerCmd := uuid.NewString()
	if out, err := steerAs(ctx, a, ownerCmd, bobTurn, "mention the deadline"); err != nil || out.SteerTurn.State != "PENDING" {
		t.Fatalf("owner's steer of bob's turn: %+v, %v", out, err)
	}

	// A turn that has not ended has spent nothing yet: usage is null.
	var q struct {
		Turn struct {
			State string
			Usage *struct{ ModelCalls int64 } `json:"usage"`
		} `json:"turn"`
	}
	if err := a.Do(ctx, `query($id: ID!) { turn(id: $id) { state usage { modelCalls } } }`, map[string]any{"id": aliceTurn}, &q); err != nil {
		t.Fatal(err)
	}
	if q.Turn.State != "QUEUED" || q.Turn.Usage != nil {
		t.Fatalf("queued turn: state %s, usage %+v; want QUEUED with null usage", q.Turn.State, q.Turn.Usage)
	}

	// End the turn; steering it now is a CONFLICT and stores nothing.
	if err := a.Do(ctx, `mutation($c: ID!, $t: ID!) { cancelTurn(input: {commandId: $c, turnId: $t}) { state } }`,
		map[string]any{"c": uuid.NewString(), "t": aliceTurn}, nil); err != nil {
		t.Fatal(err)
	}
	cmds := commandRows(t, h)
	if _, err := steerAs(ctx, a, uuid.NewString(), aliceTurn, "too late"); gqlclient.CodeOf(err) != "CONFLICT" {
		t.Fatalf("steer of a cancelled turn: err = %v, want CONFLICT", err)
	}
	if n := commandRows(t, h); n != cmds {
		t.Fatalf("steer of a cancelled turn stored a command: %d commands, want %d", n, cmds)
	}
}

// steerEntry is a journal entry as TestSteerDeliveredAtStepBoundary reads it.
type steerEntry struct {
	Seq     int64   `json:"seq"`
	Kind    string  `json:"kind"`
	TurnID  *string `json:"turnId"`
	ActorID *string `json:"actorId"`
	Text    *string `json:"text"`
}

func (e steerEntry) of(turnID string) bool { return e.TurnID != nil && *e.TurnID == turnID }

const steerJournalFields = `seq kind turnId actorId text`

// TestSteerDeliveredAtStepBoundary: through the real server with a paced
// model — a steer of a queued turn is delivered when its run reaches its
// first step boundary (a steer_delivered entry between turn_started and
// the first answer delta, naming the member) and the answer follows it; a
// steer of a turn already streaming its last model step is delivered at
// the boundary after that step, and one more step answers with it. Retries
// report each command's final state; steering a completed turn is a CONFLICT. The completed turns'
// usage is settled, and the journal query shows exactly the entries the
// subscription streamed and the runs wrote.
func TestSteerDeliveredAtStepBoundary(t *testing.T) {
	t.Parallel()
	// A paced model holds the first turn in its answer while the second
	// waits behind it in the room's lane.
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 25 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	var me struct{ Me struct{ ID string } }
	if err := a.Do(ctx, `{ me { id } }`, nil, &me); err != nil {
		t.Fatal(err)
	}
	room := servertest.Rooms(t, a)["Team room"]
	conn := h.Dial(t, ctx, a)
	defer conn.Close()
	msgs, err := conn.Subscribe(ctx, "steer", gqlclient.Request{
		Query:     `subscription($c: ID!, $after: Int) { journal(conversationId: $c, after: $after) { ` + steerJournalFields + ` } }`,
		Variables: map[string]any{"c": room.ID, "after": room.Head},
	})
	if err != nil {
		t.Fatal(err)
	}

	// Not a question, so the model answers in one step, without tools.
	first := servertest.SubmitAs(t, ctx, a, room.ID, strings.Repeat("Durable turns keep their journal and their answers. ", 6), "steer-run-1")
	var seen []steerEntry
	for {
		e := servertest.NextJournal[steerEntry](t, ctx, msgs)
		seen = append(seen, e)
		if e.Kind == "ANSWER_DELTA" && e.of(first) {
			break
		}
	}
	// The first turn is inside its one model step: this steer waits for
	// the boundary after it, and one more step follows.
	lateCmd := uuid.NewString()
	late, err := steerAs(ctx, a, lateCmd, first, "too late for this answer")
	if err != nil {
		t.Fatal(err)
	}
	if s := late.SteerTurn; s.State != "PENDING" || s.Turn.State != "RUNNING" {
		t.Fatalf("steer mid-answer: %+v, want PENDING on a RUNNING turn", s)
	}
	// The second turn waits behind the first: its steer is delivered when
	// its run starts.
	second := servertest.SubmitAs(t, ctx, a, room.ID, "Summarise the plan in one line.", "steer-run-2")
	steerCmd := uuid.NewString()
	const steerText = "mention the Friday deadline"
	early, err := steerAs(ctx, a, steerCmd, second, steerText)
	if err != nil {
		t.Fatal(err)
	}
	if s := early.SteerTurn; s.CommandID != steerCmd || s.State != "PENDING" || s.Turn.State != "QUEUED" {
		t.Fatalf("steer of the queued turn: %+v, want PENDING on a QUEUED turn", s)
	}
	for {
		e := servertest.NextJournal[steerEntry](t, ctx, msgs)
		seen = append(seen, e)
		if e.Kind == "TURN_TERMINAL" && e.of(second) {
			break
		}
	}

	kinds := func(turnID string) []string {
		var out []string
		for _, e := range seen {
			if e.of(turnID) {
				out = append(out, e.Kind)
			}
		}
		return out
	}
	// The first turn's run delivered its steer after its answer step, and
	// answered again; the second's delivered the steer at its first step
	// boundary, before any of its answer.
	fk := kinds(first)
	fat := func(kind string) int { return slices.Index(fk, kind) }
	if n := len(fk); fat("STEER_DELIVERED") < fat("ANSWER_DELTA") || slices.Index(fk[fat("STEER_DELIVERED"):], "ANSWER_DELTA") < 0 ||
		fk[n-2] != "TURN_ANSWER" || fk[n-1] != "TURN_TERMINAL" {
		t.Fatalf("first turn's entries %v: want its answer deltas, STEER_DELIVERED, more deltas, TURN_ANSWER, TURN_TERMINAL", fk)
	}
	ks := kinds(second)
	at := func(kind string) int { return slices.Index(ks, kind) }
	if n := len(ks); n < 5 || ks[0] != "TURN_ACCEPTED" || ks[n-2] != "TURN_ANSWER" || ks[n-1] != "TURN_TERMINAL" ||
		at("TURN_STARTED") < 0 || at("STEER_DELIVERED") < at("TURN_STARTED") || at("ANSWER_DELTA") < at("STEER_DELIVERED") {
		t.Fatalf("second turn's entries %v: want TURN_ACCEPTED, TURN_STARTED, STEER_DELIVERED before the first ANSWER_DELTA, … TURN_ANSWER, TURN_TERMINAL", ks)
	}
	for _, e := range seen {
		if e.Kind != "STEER_DELIVERED" {
			continue
		}
		want := steerText
		if e.of(first) {
			want = "too late for this answer"
		}
		if e.ActorID == nil || *e.ActorID != me.Me.ID || e.Text == nil || *e.Text != want {
			t.Fatalf("steer_delivered entry %+v, want actor %s and text %q", e, me.Me.ID, want)
		}
	}

	// Each command's retry converges on its final state.
	if out, err := steerAs(ctx, a, steerCmd, second, steerText); err != nil || out.SteerTurn.State != "DELIVERED" || out.SteerTurn.Turn.State != "COMPLETED" {
		t.Fatalf("retry of the delivered steer: %+v, %v; want DELIVERED on a COMPLETED turn", out, err)
	}
	if out, err := steerAs(ctx, a, lateCmd, first, "too late for this answer"); err != nil || out.SteerTurn.State != "DELIVERED" {
		t.Fatalf("retry of the late steer: %+v, %v; want DELIVERED", out, err)
	}
	// A completed turn can no longer be steered.
	cmds := commandRows(t, h)
	if _, err := steerAs(ctx, a, uuid.NewString(), second, "and another thing"); gqlclient.CodeOf(err) != "CONFLICT" {
		t.Fatalf("steer of a completed turn: err = %v, want CONFLICT", err)
	}
	if n := commandRows(t, h); n != cmds {
		t.Fatalf("steer of a completed turn stored a command: %d commands, want %d", n, cmds)
	}

	// The answers and the settled usage, through GraphQL.
	type usage struct{ InputTokens, OutputTokens, ModelCalls, ToolCalls int64 }
	for _, id := range []string{first, second} {
		var q struct {
			Turn struct {
				State  string
				Answer string
				Usage  *usage
			} `json:"turn"`
		}
		if err := a.Do(ctx, `query($id: ID!) { turn(id: $id) { state answer usage { inputTokens outputTokens modelCalls toolCalls } } }`,
			map[string]any{"id": id}, &q); err != nil {
			t.Fatal(err)
		}
		u := q.Turn.Usage
		if q.Turn.State != "COMPLETED" || u == nil || u.ModelCalls < 1 || u.InputTokens < 1 || u.OutputTokens < 1 || u.ToolCalls != 0 {
			t.Fatalf("turn %s: state %s, usage %+v; want COMPLETED with settled usage of at least one model call", id, q.Turn.State, u)
		}
		steered := strings.Contains(q.Turn.Answer, steerText)
		if steered != (id == second) {
			t.Fatalf("turn %s's answer %q: follows the steer = %v", id, q.Turn.Answer, steered)
		}
	}

	// The journal query shows exactly what the subscription streamed, and
	// both are what the runs wrote.
	var page struct {
		Journal struct {
			Entries []steerEntry
			HasMore bool
		} `json:"journal"`
	}
	if err := a.Do(ctx, `query($c: ID!, $after: Int) { journal(conversationId: $c, after: $after, first: 500) { entries { `+steerJournalFields+` } hasMore } }`,
		map[string]any{"c": room.ID, "after": room.Head}, &page); err != nil {
		t.Fatal(err)
	}
	if page.Journal.HasMore || len(page.Journal.Entries) != len(seen) {
		t.Fatalf("journal query: %d entries (more: %v), the subscription streamed %d", len(page.Journal.Entries), page.Journal.HasMore, len(seen))
	}
	for i, e := range page.Journal.Entries {
		if s := seen[i]; e.Seq != s.Seq || e.Kind != s.Kind || e.of(first) != s.of(first) || e.of(second) != s.of(second) {
			t.Fatalf("journal entry %d: query %+v, subscription %+v", i, e, s)
		}
	}
	rows, err := h.DB.QueryContext(ctx, `SELECT upper(kind::text) FROM journal_entries WHERE conversation_id = $1 AND seq > $2 ORDER BY seq`, room.ID, room.Head)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var stored []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var streamed []string
	for _, e := range seen {
		streamed = append(streamed, e.Kind)
	}
	if strings.Join(stored, " ") != strings.Join(streamed, " ") {
		t.Fatalf("the runs wrote %v, the subscription streamed %v", stored, streamed)
	}
}
