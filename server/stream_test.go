package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestJournalStreamResumes: a real graphql-transport-ws client subscribes,
// drops its connection mid-answer, reconnects with after = the last
// position it saw, and receives the rest exactly once; the answer it
// assembles equals the stored one.
func TestJournalStreamResumes(t *testing.T) {
	t.Parallel()
	// A paced model keeps the answer streaming long enough to drop the
	// connection in the middle of it.
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 30 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := h.Client(t, alice)
	room := servertest.Rooms(t, c)["Team room"]
	conn := h.Dial(t, ctx, c)
	msgs, err := conn.Subscribe(ctx, "j1", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}})
	if err != nil {
		t.Fatal(err)
	}
	var turn struct {
		SubmitMessage struct{ ID string } `json:"submitMessage"`
	}
	text := strings.Repeat("Tell me about durable turns and their journal. ", 6)
	if err := c.Do(ctx, `mutation($c: ID!, $t: String!) { submitMessage(input: {conversationId: $c, text: $t, idempotencyKey: "resume-1"}) { id } }`,
		map[string]any{"c": room.ID, "t": text}, &turn); err != nil {
		t.Fatal(err)
	}

	// Read until the first answer delta, then drop the connection.
	var seen []servertest.WireEntry
	for {
		e := servertest.NextJournal[servertest.WireEntry](t, ctx, msgs)
		seen = append(seen, e)
		if e.Kind == "ANSWER_DELTA" {
			break
		}
	}
	conn.Close()
	// Reconnect after the last position seen.
	last := seen[len(seen)-1].Seq
	conn2 := h.Dial(t, ctx, c)
	defer conn2.Close()
	msgs2, err := conn2.Subscribe(ctx, "j2", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": last}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		e := servertest.NextJournal[servertest.WireEntry](t, ctx, msgs2)
		seen = append(seen, e)
		if e.Kind == "TURN_TERMINAL" {
			break
		}
	}

	// Positions are dense from the first one we asked for: nothing lost,
	// nothing twice.
	for i, e := range seen {
		if want := room.Head + 1 + int64(i); e.Seq != want {
			t.Fatalf("entry %d has seq %d, want %d (gap or duplicate across the reconnect)", i, e.Seq, want)
		}
	}
	var assembled, answer strings.Builder
	deltasAfterReconnect := 0
	for _, e := range seen {
		switch e.Kind {
		case "ANSWER_DELTA":
			assembled.WriteString(*e.Text)
			if e.Seq > last {
				deltasAfterReconnect++
			}
		case "TURN_ANSWER":
			answer.WriteString(*e.Text)
		}
	}
	if deltasAfterReconnect == 0 {
		t.Fatal("the answer had finished before the connection dropped: no delta arrived after reconnecting")
	}
	var stored struct {
		Turn struct {
			State  string
			Answer string
		} `json:"turn"`
	}
	if err := c.Do(ctx, `query($id: ID!) { turn(id: $id) { state answer } }`, map[string]any{"id": turn.SubmitMessage.ID}, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Turn.State != "COMPLETED" {
		t.Fatalf("turn state %s, want COMPLETED", stored.Turn.State)
	}
	if assembled.String() != stored.Turn.Answer || answer.String() != stored.Turn.Answer {
		t.Fatalf("assembled deltas %q\nturn_answer %q\nstored %q", assembled.String(), answer.String(), stored.Turn.Answer)
	}
}

// TestTokenStreamOverSSE: tokens(turnId) over Server-Sent Events (the
// transport the explorer uses) streams the turn's answer text and
// completes when the turn ends; the text equals the stored answer.
func TestTokenStreamOverSSE(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 5 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := h.Client(t, bob)
	room := servertest.Rooms(t, c)["Bob's notes"]
	turnID := servertest.SubmitAs(t, ctx, c, room.PublicKey, "stream me over SSE", "sse-1")
	events, err := c.SSE(ctx, gqlclient.Request{
		Query:     `subscription($t: ID!) { tokens(turnId: $t) { seq attempt offset text } }`,
		Variables: map[string]any{"t": turnID},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for ev := range events {
		if err := ev.Err(); err != nil {
			t.Fatal(err)
		}
		var d struct {
			Tokens struct {
				Offset int
				Text   string
			} `json:"tokens"`
		}
		if err := jsonUnmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Tokens.Offset != text.Len() {
			t.Fatalf("delta at offset %d after %d bytes of text", d.Tokens.Offset, text.Len())
		}
		text.WriteString(d.Tokens.Text)
	}
	if ctx.Err() != nil {
		t.Fatal("token stream did not complete")
	}
	var stored struct {
		Turn struct{ State, Answer string } `json:"turn"`
	}
	if err := c.Do(ctx, `query($id: ID!) { turn(id: $id) { state answer } }`, map[string]any{"id": turnID}, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Turn.State != "COMPLETED" || text.String() != stored.Turn.Answer || text.Len() == 0 {
		t.Fatalf("streamed %q; stored %s %q", text.String(), stored.Turn.State, stored.Turn.Answer)
	}
}
