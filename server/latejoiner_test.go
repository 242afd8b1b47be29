package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// everyPathOf is everything viewer can read of a turn and its room, on
// every read path: the turn with its answer, citations, artifacts,
// approvals and replay; the journal page over HTTP; the journal from the
// start over graphql-transport-ws and over SSE; the turn's tokens over
// SSE.
func everyPathOf(t *testing.T, ctx context.Context, h *servertest.Harness, c *gqlclient.Client, room, turnID string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	var q struct {
		Turn    any `json:"turn"`
		Journal struct {
			Head    int64
			Entries []any
		} `json:"journal"`
	}
	if err := c.Do(ctx, `query($t: ID!, $c: ID!) {
  turn(id: $t) { answer terminalReason terminal { outcome reason } citations { id source passage documentId digest }
    artifacts { name sha256 } approvals { tool arguments }
    modelCalls { text toolCalls { arguments } messages { content } } }
  journal(conversationId: $c, first: 500) { head entries { kind text payload } } }`, map[string]any{"t": turnID, "c": room}, &q); err != nil {
		t.Fatal(err)
	}
	paths["turn"] = toJSON(t, q.Turn)
	paths["journal over HTTP"] = toJSON(t, q.Journal.Entries)
	head := q.Journal.Head

	sub := gqlclient.Request{Query: `subscription($c: ID!) { journal(conversationId: $c, after: 0) { seq kind text payload } }`,
		Variables: map[string]any{"c": room}}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sse, err := c.SSE(sctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	paths["journal over SSE"] = readUntil(t, sctx, head, func() (json.RawMessage, bool) {
		r, ok := <-sse
		return r.Data, ok
	})

	conn, err := gqlclient.Dial(sctx, h.Base+"/graphql", http.Header{h.Config.IdentityHeader: c.Header.Values(h.Config.IdentityHeader)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ws, err := conn.Subscribe(sctx, "1", sub)
	if err != nil {
		t.Fatal(err)
	}
	paths["journal over WebSocket"] = readUntil(t, sctx, head, func() (json.RawMessage, bool) {
		m, ok := <-ws
		if ok && m.Type != "next" {
			t.Fatalf("journal over WebSocket: %s %s", m.Type, m.Payload)
		}
		var r gqlclient.Response
		_ = json.Unmarshal(m.Payload, &r)
		return r.Data, ok
	})

	tokens, err := c.SSE(sctx, gqlclient.Request{Query: `subscription($t: ID!) { tokens(turnId: $t, after: 0) { seq text } }`,
		Variables: map[string]any{"t": turnID}})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for r := range tokens {
		sb.Write(r.Data)
	}
	paths["tokens over SSE"] = sb.String()
	return paths
}

// readUntil collects a journal stream's data until position head.
func readUntil(t *testing.T, ctx context.Context, head int64, next func() (json.RawMessage, bool)) string {
	t.Helper()
	var sb strings.Builder
	for {
		data, ok := next()
		if !ok {
			t.Fatalf("the stream ended before position %d: %s", head, sb.String())
		}
		sb.Write(data)
		var e struct {
			Journal struct{ Seq int64 } `json:"journal"`
		}
		if json.Unmarshal(data, &e) == nil && e.Journal.Seq >= head {
			return sb.String()
		}
		if ctx.Err() != nil {
			t.Fatalf("the stream did not reach position %d", head)
		}
	}
}

// leaks lists, per path, the secrets a viewer reads there.
func leaks(paths map[string]string, secrets []string) []string {
	var out []string
	for path, seen := range paths {
		for _, s := range secrets {
			if strings.Contains(seen, s) {
				out = append(out, fmt.Sprintf("%s reads %q", path, s))
			}
		}
	}
	return out
}

// TestLateJoinerReadsNothingOfWhatTheyMayNot is the attack: alice
// asks, alone in a shared room, about the compensation bands, which only
// she may read; then she adds bob. addRoomMember tells her bob will read
// one earlier turn withheld. Bob reads nothing of the bands — figures,
// title, id or digest — on any path: the turn, its citations, artifacts
// and replay, the journal over HTTP, WebSocket and SSE, the tokens; the
// turn reads withheld to him, positions kept. Alice still reads it all.
// Then, with bob in the room, every model context is built for both:
// alice's next turn there and bob's own turn there carry nothing of the
// bands in their answers or their model calls (history, summary, history
// search), and bob may read those turns whole.
func TestLateJoinerReadsNothingOfWhatTheyMayNot(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	secrets := secretsOf(t, h, "Compensation bands 2027", "95,000", "120,000", "150,000")
	room, bands := servertest.SoloSharedRoom(t, ctx, h, a)

	if n := servertest.AddMember(t, ctx, a, room, bob); n != 1 {
		t.Errorf("addRoomMember says bob will read %d earlier turns withheld; want 1", n)
	}
	bobs := everyPathOf(t, ctx, h, b, room, bands)
	for _, l := range leaks(bobs, secrets) {
		t.Errorf("bob, added later, %s", l)
	}
	if !strings.Contains(bobs["turn"], `"AUDIENCE_WITHHELD"`) || !strings.Contains(bobs["turn"], "withheld") {
		t.Errorf("bob does not read the turn as withheld: %s", bobs["turn"])
	}
	if alices := everyPathOf(t, ctx, h, a, room, bands); len(leaks(alices, secrets[:1])) != len(alices) {
		t.Errorf("alice, who may read the bands, reads them only where %v", leaks(alices, secrets[:1]))
	}

	// With bob in the room, the room's model contexts are built for both.
	later := servertest.SubmitAs(t, ctx, a, room, "When is the launch? And remind me of the bands.", "after-bob")
	if state := servertest.WaitTurnState(t, ctx, h.DB, later); state != "completed" {
		t.Fatalf("alice's later turn ended %s", state)
	}
	own := servertest.SubmitAs(t, ctx, b, room, "What did alice find out about the engineering bands?", "bobs-own")
	if state := servertest.WaitTurnState(t, ctx, h.DB, own); state != "completed" {
		t.Fatalf("bob's turn ended %s", state)
	}
	for name, id := range map[string]string{"alice's later turn": later, "bob's own turn": own} {
		seen := everyPathOf(t, ctx, h, b, room, id)
		for _, l := range leaks(map[string]string{"turn": seen["turn"]}, secrets) {
			t.Errorf("%s, built with bob in the room: bob's %s", name, l)
		}
		if strings.Contains(seen["turn"], `"AUDIENCE_WITHHELD"`) {
			t.Errorf("%s reads withheld to bob: its context drew on what he may not read: %s", name, seen["turn"])
		}
	}
}

// TestJoinerMidAnswerReadsNoText: carol, who may not read the launch
// plan, is added to the Team room while alice's answer about it streams.
// From then on every delta of that turn reaches carol empty, live and
// replayed alike — she never reads the part streamed before she joined,
// nor the rest — and the turn ends withheld (from the whole room, since
// its audience changed before publication).
func TestJoinerMidAnswerReadsNoText(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 30 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	carol := h.Client(t, "carol@example.com")
	if err := carol.Do(ctx, `{ me { id } }`, nil, nil); err != nil {
		t.Fatal(err)
	}
	team := servertest.Rooms(t, a)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, a, team.ID, "When is the launch?", "launch-mid-answer")
	servertest.WaitFor(t, ctx, h.DB, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
	servertest.AddMember(t, ctx, a, team.ID, "carol@example.com")

	tokens, err := carol.SSE(ctx, gqlclient.Request{Query: `subscription($t: ID!) { tokens(turnId: $t, after: 0) { seq text } }`,
		Variables: map[string]any{"t": turnID}})
	if err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for r := range tokens {
		var d struct {
			Tokens struct {
				Seq  int64
				Text string
			}
		}
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Tokens.Text != "" {
			t.Fatalf("carol, added mid-answer, reads the delta at %d: %q", d.Tokens.Seq, d.Tokens.Text)
		}
		deltas++
	}
	if deltas == 0 {
		t.Fatal("carol's token stream carried no delta at all: positions must be kept")
	}
	if state := servertest.WaitTurnState(t, ctx, h.DB, turnID); state != "completed" {
		t.Fatalf("turn ended %s", state)
	}
	for _, s := range secretsOf(t, h, "Launch plan", "11 December", "Friday") {
		if seen := everythingOf(t, ctx, carol, team.ID, turnID); strings.Contains(seen, s) {
			t.Errorf("carol, added mid-answer, reads %q of the launch plan", s)
		}
	}
}
