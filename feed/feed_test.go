package feed_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/feed"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/migrations"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/room"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

// The figures of the demo's compensation bands, which only alice may read.
const bandsTitle, bandsFigure = "Compensation bands 2027", "120,000"

// bundle is one test's world: the demo, a shared room alice worked in
// alone, and a finished turn of hers there that drew on the bands.
type bundle struct {
	env   *testkit.Env
	feed  *feed.Feed
	room  uuid.UUID
	turn  uuid.UUID
	bands uuid.UUID
}

// setup plays alice's solo turn in a new shared room: it read the bands
// (its evidence), streamed a delta quoting them, asked for a tool with
// them in its arguments, and answered citing them.
func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	env := testkit.New(t)
	b := &bundle{env: env, feed: feed.New(env.Client, journal.NewLog(env.Client, env.Hub))}
	if err := env.DB.QueryRow(`SELECT id FROM documents WHERE title = $1`, bandsTitle).Scan(&b.bands); err != nil {
		t.Fatal(err)
	}
	c, err := env.Rooms.Create(ctx, env.Alice, room.NewInput{Title: "Alice's planning", Kind: entconv.KindShared})
	if err != nil {
		t.Fatal(err)
	}
	b.room = c.ID
	b.turn = b.finishedTurn(t, env.Alice, "What are the bands?", "Engineers earn up to "+bandsFigure+" [doc:"+b.bands.String()+"#p0].", b.bands)
	return b
}

// finishedTurn accepts text from author and writes, as a run would, a
// completed turn whose evidence is docs, answering answer.
func (b *bundle) finishedTurn(t *testing.T, author authority.Member, text, answer string, docs ...uuid.UUID) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	tt := b.env.Submit(t, author, b.room, text)
	for _, d := range docs {
		if _, err := b.env.DB.Exec(`INSERT INTO turn_evidence (id, conversation_id, turn_id, document_id) VALUES ($1, $2, $3, $4)`,
			uuid.New(), b.room, tt.ID, d); err != nil {
			t.Fatal(err)
		}
	}
	var cites []journal.AnswerCitation
	for _, d := range docs {
		cites = append(cites, journal.AnswerCitation{ID: "doc:" + d.String() + "#p0", Document: d, Source: bandsTitle, Passage: answer})
	}
	id := uuid.NullUUID{UUID: tt.ID, Valid: true}
	entries, err := journal.Append(ctx, b.env.DB, b.room, nil,
		journal.Draft{Kind: journal.KindToolRequested, TurnID: id, Attempt: 1, Payload: journal.ToolRequestedPayload{CallID: "c1", Name: "run_code", Arguments: `{"code":"` + bandsFigure + `"}`}},
		journal.Draft{Kind: journal.KindAnswerDelta, TurnID: id, Attempt: 1, Payload: journal.DeltaPayload{Text: answer}},
		journal.Draft{Kind: journal.KindTurnAnswer, TurnID: id, Attempt: 1, Payload: journal.AnswerPayload{Text: answer, Citations: cites,
			Artifacts: []journal.AnswerArtifact{{ArtifactID: uuid.New(), Name: "bands.csv", MediaType: "text/csv"}}}},
		journal.Draft{Kind: journal.KindTurnTerminal, TurnID: id, Attempt: 1, Payload: journal.TerminalPayload{Outcome: "completed", Reason: outcome.ReasonCompleted}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.env.DB.Exec(`UPDATE turns SET state = 'completed', answer = $2, terminal_reason = $3, attempt = 1 WHERE id = $1`,
		tt.ID, answer, outcome.ReasonCompleted); err != nil {
		t.Fatal(err)
	}
	b.env.Hub.Committed(b.room, entries[len(entries)-1].Seq)
	return tt.ID
}

func (b *bundle) add(t *testing.T, email string) authority.Member {
	t.Helper()
	var m authority.Member
	if email == b.env.Bob.Email {
		m = b.env.Bob
	} else {
		m = b.env.NewMember(t, email)
	}
	if _, err := b.env.Rooms.AddMember(context.Background(), b.env.Alice, b.room.String(), email); err != nil {
		t.Fatal(err)
	}
	return m
}

// seen is everything of the room's journal a viewer reads, as text.
func seen(entries []journal.Entry) string {
	var sb strings.Builder
	for _, e := range entries {
		sb.WriteString(string(e.Kind))
		sb.Write(e.Payload)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// readsWithheld checks that entries show the turn as withheld, positions
// kept: empty delta text, "{}" tool arguments, the withheld notice with
// no artifacts and no citation of the bands, a completed terminal read as
// audience_withheld.
func readsWithheld(t *testing.T, who string, b *bundle, entries []journal.Entry) {
	t.Helper()
	if s := seen(entries); strings.Contains(s, bandsFigure) || strings.Contains(s, b.bands.String()) || strings.Contains(s, "bands.csv") {
		t.Fatalf("%s reads the bands through the journal:\n%s", who, s)
	}
	kinds := map[journal.Kind]journal.Entry{}
	for _, e := range entries {
		if e.TurnID.UUID == b.turn {
			kinds[e.Kind] = e
		}
	}
	var d journal.DeltaPayload
	var a journal.AnswerPayload
	var term journal.TerminalPayload
	var tool journal.ToolRequestedPayload
	for _, x := range []struct {
		kind journal.Kind
		v    any
	}{{journal.KindAnswerDelta, &d}, {journal.KindTurnAnswer, &a}, {journal.KindTurnTerminal, &term}, {journal.KindToolRequested, &tool}} {
		e, ok := kinds[x.kind]
		if !ok {
			t.Fatalf("%s does not read the turn's %s entry at its position", who, x.kind)
		}
		if err := json.Unmarshal(e.Payload, x.v); err != nil {
			t.Fatal(err)
		}
	}
	if d.Text != "" || a.Text != outcome.WithheldAnswer || len(a.Artifacts) != 0 || len(a.Citations) != 0 ||
		term.Reason != outcome.ReasonAudienceWithheld || tool.Arguments != "{}" {
		t.Fatalf("%s reads the turn as delta %q, answer %+v, terminal %+v, tool %+v; want it withheld", who, d.Text, a, term, tool)
	}
}

// TestLateJoinerReadsTheTurnWithheld: bob, added after alice's solo turn
// drew on the bands, reads it withheld on every path the feed serves — a
// page, a follow replaying the room from its start, a follow that was
// already running, the turn as a whole — and alice, who may read the
// bands, reads it as stored.
func TestLateJoinerReadsTheTurnWithheld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bob := b.add(t, "bob@example.com")

	page, err := b.feed.Page(ctx, bob, b.room, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	readsWithheld(t, "bob's page", b, page)
	own, err := b.feed.Page(ctx, b.env.Alice, b.room, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen(own), bandsFigure) {
		t.Fatalf("alice, who may read the bands, lost them:\n%s", seen(own))
	}

	// Both follows replay the room from its start; the second starts
	// after the room's shared tail has read the turn for the first.
	head := page[len(page)-1].Seq
	for _, who := range []string{"first follow", "second follow"} {
		got := follow(t, ctx, b.feed, bob, b.room, head)
		readsWithheld(t, "bob's "+who, b, got)
	}

	rd, err := b.feed.Read(ctx, bob, b.room, b.turn, nil)
	if err != nil {
		t.Fatal(err)
	}
	answer := "x"
	if !rd.Withheld() || *rd.Answer(&answer) != outcome.WithheldAnswer || *rd.TerminalReason("completed", &answer) != outcome.ReasonAudienceWithheld {
		t.Fatalf("bob reads the turn as withheld=%v", rd.Withheld())
	}
	if n, err := b.feed.WithheldTurns(ctx, b.room, bob.ID); err != nil || n != 1 {
		t.Fatalf("bob's withheld turns: %d, %v; want 1", n, err)
	}
	if n, err := b.feed.WithheldTurns(ctx, b.room, b.env.Alice.ID); err != nil || n != 0 {
		t.Fatalf("alice's withheld turns: %d, %v; want 0", n, err)
	}
}

// follow reads room as viewer through Feed.Follow until position head.
func follow(t *testing.T, ctx context.Context, f *feed.Feed, viewer authority.Member, room uuid.UUID, head int64) []journal.Entry {
	t.Helper()
	var got []journal.Entry
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := f.Follow(fctx, viewer, room, 0, func(e journal.Entry, _ bool) error {
		got = append(got, e)
		if e.Seq >= head {
			cancel()
		}
		return nil
	})
	if ctx.Err() != nil {
		t.Fatalf("follow did not reach position %d: %v", head, err)
	}
	return got
}

// TestLiveFollowerReadsANewTurnWithheld: bob follows the room live; alice
// then runs another turn drawing on the bands. The entries reach bob from
// the room's shared tail, withheld, while alice's follow reads them.
func TestLiveFollowerReadsANewTurnWithheld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bob := b.add(t, "bob@example.com")
	head, err := journal.Head(ctx, b.env.DB, b.room)
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		entries []journal.Entry
		err     error
	}
	watch := func(who authority.Member, until func(journal.Entry) bool) (<-chan result, func()) {
		out := make(chan result, 1)
		fctx, cancel := context.WithCancel(ctx)
		go func() {
			var got []journal.Entry
			err := b.feed.Follow(fctx, who, b.room, head, func(e journal.Entry, _ bool) error {
				got = append(got, e)
				if until(e) {
					cancel()
				}
				return nil
			})
			out <- result{got, err}
		}()
		return out, cancel
	}
	ends := func(e journal.Entry) bool { return e.Kind == journal.KindTurnTerminal }
	bobs, stopBob := watch(bob, ends)
	defer stopBob()
	alices, stopAlice := watch(b.env.Alice, ends)
	defer stopAlice()

	b.turn = b.finishedTurn(t, b.env.Alice, "And the bands for managers?", "Managers earn up to "+bandsFigure+" [doc:"+b.bands.String()+"#p0].", b.bands)

	select {
	case r := <-bobs:
		readsWithheld(t, "bob, following live", b, r.entries)
	case <-ctx.Done():
		t.Fatal("bob's follow did not see the turn end")
	}
	select {
	case r := <-alices:
		if !strings.Contains(seen(r.entries), bandsFigure) {
			t.Fatalf("alice, following live, lost the bands:\n%s", seen(r.entries))
		}
	case <-ctx.Done():
		t.Fatal("alice's follow did not see the turn end")
	}
}

// TestRevokedReaderReadsTheTurnWithheld: the rule holds for the turn's
// own author too — alice loses the bands' ACL, then reads her own turn
// withheld; a reader through a group reads it until removed from the
// group.
func TestRevokedReaderReadsTheTurnWithheld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	carol := b.add(t, "carol@example.com")
	if _, err := b.env.DB.Exec(`INSERT INTO member_groups (id, member_id, name) VALUES ($1, $2, 'hr')`, uuid.New(), carol.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.env.DB.Exec(`INSERT INTO document_acls (id, document_id, principal) VALUES ($1, $2, 'group:hr')`, uuid.New(), b.bands); err != nil {
		t.Fatal(err)
	}
	if _, err := b.env.DB.Exec(`INSERT INTO member_permissions (id, member_id, permission) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		uuid.New(), carol.ID, authority.PermissionDocumentsRead); err != nil {
		t.Fatal(err)
	}
	page, err := b.feed.Page(ctx, carol, b.room, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(seen(page), bandsFigure) {
		t.Fatalf("carol, a reader through group hr, does not read the turn:\n%s", seen(page))
	}
	if _, err := b.env.DB.Exec(`DELETE FROM member_groups WHERE member_id = $1 AND name = 'hr'`, carol.ID); err != nil {
		t.Fatal(err)
	}
	if page, err = b.feed.Page(ctx, carol, b.room, 0, 100); err != nil {
		t.Fatal(err)
	}
	readsWithheld(t, "carol, out of group hr", b, page)

	if _, err := b.env.DB.Exec(`DELETE FROM document_acls WHERE document_id = $1 AND principal = $2`, b.bands, b.env.Alice.Email); err != nil {
		t.Fatal(err)
	}
	if page, err = b.feed.Page(ctx, b.env.Alice, b.room, 0, 100); err != nil {
		t.Fatal(err)
	}
	readsWithheld(t, "alice, after losing the bands' ACL", b, page)
}
