package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/demo"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/server"
)

// secretsOf is what must not reach a member who may not read doc: its
// figures, its title, its id and its digest.
func secretsOf(t *testing.T, h *servertest.Harness, title string, figures ...string) []string {
	t.Helper()
	var id string
	if err := h.DB.QueryRow(`SELECT id FROM documents WHERE title = $1`, title).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, d := range demo.Documents {
		if d.Title == title {
			return append(figures, title, id, resource.Digest(d.Body))
		}
	}
	t.Fatalf("no demo document %q", title)
	return nil
}

// everythingOf is all a viewer can read of a turn: its answer and
// citations, the room's journal entries and the turn's tokens.
func everythingOf(t *testing.T, ctx context.Context, c *gqlclient.Client, room, turnID string) string {
	t.Helper()
	var b strings.Builder
	var q struct {
		Turn    any `json:"turn"`
		Journal any `json:"journal"`
	}
	if err := c.Do(ctx, `query($t: ID!, $c: ID!) {
  turn(id: $t) { answer terminalReason citations { id source passage documentId digest } }
  journal(conversationId: $c, first: 500) { entries { kind payload } } }`, map[string]any{"t": turnID, "c": room}, &q); err != nil {
		t.Fatal(err)
	}
	b.WriteString(toJSON(t, q))
	tokens, err := c.SSE(ctx, gqlclient.Request{Query: `subscription($t: ID!) { tokens(turnId: $t) { text } }`, Variables: map[string]any{"t": turnID}})
	if err != nil {
		t.Fatal(err)
	}
	for r := range tokens {
		b.Write(r.Data)
	}
	return b.String()
}

// TestSharedRoomAnswersOnlyWhatTheAudienceMayRead: the demo scenario. In
// the shared Team room alice asks about the compensation bands, which only
// she may read: nothing of that document — its figures, title, id or
// digest — reaches bob through the answer, its citations, the journal's
// entries or the tokens, and his own later turn in his private room finds
// nothing of it through conversation history either. Asked in her private
// room, the same question answers alice with the figures.
func TestSharedRoomAnswersOnlyWhatTheAudienceMayRead(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"]
	secrets := secretsOf(t, h, "Compensation bands 2027", "95,000", "120,000", "150,000")

	shared := servertest.SubmitAs(t, ctx, a, team.ID, "What are the engineering bands for 2027?", "bands-shared")
	if state := servertest.WaitTurnState(t, ctx, h.DB, shared); state != "completed" {
		t.Fatalf("shared turn ended %s", state)
	}
	for who, c := range map[string]*gqlclient.Client{"bob": b, "alice": a} {
		seen := everythingOf(t, ctx, c, team.ID, shared)
		for _, s := range secrets {
			if strings.Contains(seen, s) {
				t.Errorf("%s reads %q of the compensation bands in the shared room", who, s)
			}
		}
	}

	bobs := servertest.Rooms(t, b)["Bob's notes"]
	private := servertest.SubmitAs(t, ctx, b, bobs.ID, "What did we say about the engineering bands?", "bands-history")
	if state := servertest.WaitTurnState(t, ctx, h.DB, private); state != "completed" {
		t.Fatalf("bob's turn ended %s", state)
	}
	seen := everythingOf(t, ctx, b, bobs.ID, private)
	for _, s := range secrets {
		if strings.Contains(seen, s) {
			t.Errorf("bob finds %q of the compensation bands through history", s)
		}
	}

	alices := servertest.Rooms(t, a)["Alice's notes"]
	own := servertest.SubmitAs(t, ctx, a, alices.ID, "What are the engineering bands for 2027?", "bands-private")
	if state := servertest.WaitTurnState(t, ctx, h.DB, own); state != "completed" {
		t.Fatalf("alice's private turn ended %s", state)
	}
	if seen := everythingOf(t, ctx, a, alices.ID, own); !strings.Contains(seen, "95,000") {
		t.Fatalf("alice's private answer lacks the figures she may read: %s", seen)
	}
}

// TestMemberJoinedMidTurnWithholdsTheAnswer: a member who may not read a
// document the turn already used joins the shared room before the answer
// is published: publication checks the answer's citations against the new
// audience and withholds the answer, saying so, with no citation of that
// document.
func TestMemberJoinedMidTurnWithholdsTheAnswer(t *testing.T) {
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
	turnID := servertest.SubmitAs(t, ctx, a, team.ID, "When is the launch?", "launch-join")
	// The run has read the launch plan once it is answering.
	servertest.WaitFor(t, ctx, h.DB, `SELECT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = $1 AND kind = 'answer_delta')`, turnID)
	if err := a.Do(ctx, `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "carol@example.com"}) { id } }`,
		map[string]any{"c": team.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if state := servertest.WaitTurnState(t, ctx, h.DB, turnID); state != "completed" {
		t.Fatalf("turn ended %s", state)
	}
	var q struct {
		Turn struct {
			Answer         string
			TerminalReason string
			Citations      []struct{ Source string }
		} `json:"turn"`
	}
	if err := carol.Do(ctx, `query($t: ID!) { turn(id: $t) { answer terminalReason citations { source } } }`, map[string]any{"t": turnID}, &q); err != nil {
		t.Fatal(err)
	}
	if q.Turn.TerminalReason != "audience_withheld" || strings.Contains(q.Turn.Answer, "11 December") || !strings.Contains(q.Turn.Answer, "withheld") {
		t.Fatalf("turn after carol joined: %+v; want the answer withheld", q.Turn)
	}
	for _, c := range q.Turn.Citations {
		if c.Source == "Launch plan" {
			t.Fatalf("the withheld answer still cites the launch plan: %+v", q.Turn.Citations)
		}
	}
	// Read afterwards, nothing of the turn's use of the launch plan
	// reaches carol: not its text in the deltas, nor its title or id.
	seen := everythingOf(t, ctx, carol, team.ID, turnID)
	for _, s := range secretsOf(t, h, "Launch plan", "11 December", "Friday") {
		if strings.Contains(seen, s) {
			t.Errorf("carol, who joined mid-turn, reads %q of the launch plan", s)
		}
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCitationsAreFilteredPerViewer: defence in depth behind the audience
// rule — a turn's citations, through Turn.citations and the journal's
// TURN_ANSWER entry, show each viewer only the documents that viewer may
// read at the moment of the read: once bob loses the launch plan's ACL,
// its citation is gone for him, passage and all, and stays for alice.
// (The answer's text was written for the audience the turn had; it is
// not rewritten per viewer.)
func TestCitationsAreFilteredPerViewer(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, a, team.ID, "When is the launch?", "launch-cited")
	if state := servertest.WaitTurnState(t, ctx, h.DB, turnID); state != "completed" {
		t.Fatalf("turn ended %s", state)
	}
	cited := func(c *gqlclient.Client) (fromTurn, fromJournal bool) {
		t.Helper()
		var q struct {
			Turn struct {
				Citations []struct{ Source string }
			} `json:"turn"`
			Journal struct {
				Entries []struct {
					Kind    string
					Payload json.RawMessage
				}
			} `json:"journal"`
		}
		if err := c.Do(ctx, `query($t: ID!, $c: ID!) { turn(id: $t) { citations { source } }
  journal(conversationId: $c, first: 500) { entries { kind payload } } }`, map[string]any{"t": turnID, "c": team.ID}, &q); err != nil {
			t.Fatal(err)
		}
		for _, c := range q.Turn.Citations {
			fromTurn = fromTurn || c.Source == "Launch plan"
		}
		for _, e := range q.Journal.Entries {
			var p struct {
				Citations []struct{ Source string } `json:"citations"`
			}
			if e.Kind != "TURN_ANSWER" || json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			for _, c := range p.Citations {
				fromJournal = fromJournal || c.Source == "Launch plan"
			}
		}
		return fromTurn, fromJournal
	}
	if turn, journal := cited(b); !turn || !journal {
		t.Fatalf("bob, who may read the launch plan, sees its citation: turn %v, journal %v", turn, journal)
	}
	if _, err := h.DB.ExecContext(ctx, `DELETE FROM document_acls WHERE principal = $1
  AND document_id = (SELECT id FROM documents WHERE title = 'Launch plan')`, bob); err != nil {
		t.Fatal(err)
	}
	if turn, journal := cited(b); turn || journal {
		t.Fatalf("bob, who may no longer read the launch plan, still sees its citation: turn %v, journal %v", turn, journal)
	}
	if turn, journal := cited(a); !turn || !journal {
		t.Fatalf("alice lost the launch plan's citation: turn %v, journal %v", turn, journal)
	}
}

// TestLateJoinerReadsNoFileNorModelContextOfEarlierEvidence: alice, alone
// in a shared room she made, asks about the compensation bands only she
// may read, and the turn makes a file of them (as run_code would). She
// adds bob. The file is then NOT_FOUND to him through artifact(id), and
// 404 at /artifacts/{id}, exactly as a file that does not exist; alice
// still reads it. The model calls of his turn in the room, and of alice's
// next turn there, read back through turn replay, carry nothing of the
// bands: their history no longer holds the turn that drew on them.
func TestLateJoinerReadsNoFileNorModelContextOfEarlierEvidence(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	secrets := secretsOf(t, h, "Compensation bands 2027", "95,000", "120,000", "150,000")
	var created struct {
		CreateConversation struct{ ID string } `json:"createConversation"`
	}
	if err := a.Do(ctx, `mutation { createConversation(input: {title: "Managers", kind: SHARED}) { id } }`, nil, &created); err != nil {
		t.Fatal(err)
	}
	room := created.CreateConversation.ID
	asked := servertest.SubmitAs(t, ctx, a, room, "What are the engineering bands for 2027?", "bands-alone")
	if state := servertest.WaitTurnState(t, ctx, h.DB, asked); state != "completed" {
		t.Fatalf("alice's turn ended %s", state)
	}
	var answer string
	if err := h.DB.QueryRowContext(ctx, `SELECT answer FROM turns WHERE id = $1`, asked).Scan(&answer); err != nil || !strings.Contains(answer, "95,000") {
		t.Fatalf("alice, alone in the room, was not answered from the bands: %q (%v)", answer, err)
	}
	file, err := resource.CreateArtifact(ctx, h.DB, memberID(t, a), uuid.MustParse(asked), "bands.md", "", []byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resource.LinkToRoom(ctx, h.DB, room, []uuid.UUID{file.ID}); err != nil {
		t.Fatal(err)
	}
	path := "/artifacts/" + file.ID.String()
	readable := func(who string, c *gqlclient.Client) bool {
		t.Helper()
		resp, err := c.Raw(ctx, gqlclient.Request{Query: artifactQuery, Variables: map[string]any{"id": file.ID.String()}})
		if err != nil {
			t.Fatal(err)
		}
		res, body := download(t, h, who, path, nil)
		switch code := gqlclient.CodeOf(resp.Err()); {
		case code == "" && res.StatusCode == http.StatusOK:
			return true
		case code == "NOT_FOUND" && res.StatusCode == http.StatusNotFound:
			if seen := string(resp.Data) + string(body); strings.Contains(seen, "bands") || strings.Contains(seen, "95,000") {
				t.Errorf("%s is refused the file but reads %q", who, seen)
			}
			return false
		default:
			t.Fatalf("%s: artifact %s (%v), download %d", who, resp.Data, resp.Err(), res.StatusCode)
			return false
		}
	}
	if !readable(alice, a) {
		t.Fatal("alice cannot read the file her turn made")
	}

	if err := a.Do(ctx, `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "bob@example.com"}) { id } }`,
		map[string]any{"c": room}, nil); err != nil {
		t.Fatal(err)
	}
	if readable(bob, b) {
		t.Error("bob, who joined after, reads the file of the bands turn")
	}
	if !readable(alice, a) {
		t.Error("alice lost the file her turn made")
	}
	for _, tt := range []struct {
		who, key string
		c        *gqlclient.Client
		text     string
	}{
		{bob, "bob-after", b, "What did we say about the bands so far?"},
		{alice, "alice-after", a, "What else about the engineering bands?"},
	} {
		id := servertest.SubmitAs(t, ctx, tt.c, room, tt.text, tt.key)
		if state := servertest.WaitTurnState(t, ctx, h.DB, id); state != "completed" {
			t.Fatalf("%s's turn ended %s", tt.who, state)
		}
		calls, err := replayOf(ctx, tt.c, id, nil)
		if err != nil || len(calls) == 0 {
			t.Fatalf("%s's replay: %d calls, %v", tt.who, len(calls), err)
		}
		seen := toJSON(t, calls)
		for _, s := range secrets {
			if strings.Contains(seen, s) {
				t.Errorf("the model calls of %s's turn, bob a member, carry %q of the bands", tt.who, s)
			}
		}
	}
}
