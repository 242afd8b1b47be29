package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/demo"
	"github.com/turngate/turngate/ent"
	entconv "github.com/turngate/turngate/ent/conversation"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/resource"
	roompkg "github.com/turngate/turngate/room"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/turn"
)

// The demo's confidential document: only alice may read it.
const (
	bandsTitle    = "Compensation bands 2027"
	bandsQuestion = "What are the engineering bands for 2027?"
)

// document is a demo document's id and everything of it that must not
// reach someone who may not read it: its figures (given), title, id and
// digest.
func document(t *testing.T, env *testkit.Env, title string, figures ...string) (uuid.UUID, []string) {
	t.Helper()
	var id uuid.UUID
	if err := env.DB.QueryRow(`SELECT id FROM documents WHERE title = $1`, title).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, d := range demo.Documents {
		if d.Title == title {
			return id, append(figures, title, id.String(), resource.Digest(d.Body))
		}
	}
	t.Fatalf("no demo document %q", title)
	return uuid.Nil, nil
}

func bands(t *testing.T, env *testkit.Env) (uuid.UUID, []string) {
	t.Helper()
	return document(t, env, bandsTitle, "95,000", "120,000", "150,000")
}

// soloRoom is a new shared room alice is alone in.
func soloRoom(t *testing.T, env *testkit.Env) *ent.Conversation {
	t.Helper()
	return newRoom(t, env, entconv.KindShared)
}

// newRoom is a new room of alice's, with no turns yet.
func newRoom(t *testing.T, env *testkit.Env, kind entconv.Kind) *ent.Conversation {
	t.Helper()
	c, err := env.Rooms.Create(context.Background(), env.Alice, roompkg.NewInput{Title: "Managers", Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func addMember(t *testing.T, env *testkit.Env, room uuid.UUID, email string) {
	t.Helper()
	if _, err := env.Rooms.AddMember(context.Background(), env.Alice, room.String(), email); err != nil {
		t.Fatal(err)
	}
}

// completedBy submits text as m in room and waits for its completion.
func completedBy(t *testing.T, env *testkit.Env, m authority.Member, room uuid.UUID, text string) *ent.Turn {
	t.Helper()
	tt := env.Submit(t, m, room, text)
	done := env.WaitTerminal(t, tt.ID)
	if done.State != "completed" {
		t.Fatalf("turn %q ended %s (%v)", text, done.State, done.TerminalReason)
	}
	return done
}

// evidenceOf is the turn's recorded evidence.
func evidenceOf(t *testing.T, env *testkit.Env, tt *ent.Turn) []uuid.UUID {
	t.Helper()
	rows, err := env.DB.Query(`SELECT document_id FROM turn_evidence WHERE conversation_id = $1 AND turn_id = $2`, tt.ConversationID, tt.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// contextsOf is everything of a turn's model contexts: its stored model
// calls (requests and responses, as turn replay reads them) and its answer.
func contextsOf(t *testing.T, env *testkit.Env, tt *ent.Turn) string {
	t.Helper()
	var calls string
	if err := env.DB.QueryRow(`SELECT coalesce(string_agg(request::text || response::text, ' '), '') FROM model_calls WHERE turn_id = $1`,
		tt.ID).Scan(&calls); err != nil {
		t.Fatal(err)
	}
	answer := ""
	if tt.Answer != nil {
		answer = *tt.Answer
	}
	return calls + answer
}

// requestsText is the requests a provider received, as text.
func requestsText(t *testing.T, reqs []gateway.Request) string {
	t.Helper()
	raw, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func leaked(text string, secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if strings.Contains(text, s) {
			out = append(out, s)
		}
	}
	return out
}

// A turn's evidence is every document its text may derive from: what its
// tools returned, the documents and artifacts selected as its input, and
// the evidence of the turns it was given — as history, or as history
// search hits — transitively. Each later turn is alone in a room of its
// own, so only the path named gives it the bands.
func TestTurnEvidenceIsRecorded(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Runner(t, runner.Config{})
	ctx := context.Background()
	bandsID, _ := bands(t, env)
	room := soloRoom(t, env)
	private := func() uuid.UUID { return newRoom(t, env, entconv.KindPrivate).ID }
	holds := func(what string, tt *ent.Turn) {
		t.Helper()
		if got := evidenceOf(t, env, tt); !slices.Contains(got, bandsID) {
			t.Errorf("%s: evidence %v lacks the bands %s", what, got, bandsID)
		}
	}

	asked := completedBy(t, env, env.Alice, room.ID, bandsQuestion)
	if !strings.Contains(*asked.Answer, "95,000") {
		t.Fatalf("alice, alone, was not answered from the bands: %q", *asked.Answer)
	}
	holds("the turn that retrieved the bands", asked)
	holds("a turn given it as history", completedBy(t, env, env.Alice, room.ID, "Thanks, noted."))

	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	holds("a turn whose history search found it", completedBy(t, env, env.Alice, private(), "What did we say about the bands?"))

	env.Agent(t, "react", nil, nil)
	selected, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: private(), Text: "Summarise the document.",
		IdempotencyKey: uuid.NewString(), Documents: []uuid.UUID{bandsID}})
	if err != nil {
		t.Fatal(err)
	}
	holds("a turn given the bands as an input document", env.WaitTerminal(t, selected.ID))

	// A file the bands turn made (as run_code or create_artifact would
	// have), given as a later turn's input, carries its evidence there.
	ref, err := resource.CreateArtifact(ctx, env.Client, env.Alice.ID, asked.ID, "bands.md", "", []byte(*asked.Answer))
	if err != nil {
		t.Fatal(err)
	}
	attached, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: private(), Text: "Look at the file.",
		IdempotencyKey: uuid.NewString(), Artifacts: []uuid.UUID{ref.ID}})
	if err != nil {
		t.Fatal(err)
	}
	holds("a turn given the bands turn's file as input", env.WaitTerminal(t, attached.ID))
}

// The late joiner: alice, alone in a shared room, asks about the bands
// only she may read; then she adds bob. Every model context built in
// that room afterwards — bob's turn, and alice's own next turn, since bob
// is a member now — holds nothing of the bands: not as history, not in
// what the tools return, not in the answer.
func TestLateJoinerModelContextsHoldNothingOfEarlierEvidence(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	_, secrets := bands(t, env)
	room := soloRoom(t, env)
	asked := completedBy(t, env, env.Alice, room.ID, bandsQuestion)
	if got := leaked(contextsOf(t, env, asked), secrets); len(got) == 0 {
		t.Fatal("alice's own turn, alone in the room, drew nothing of the bands: the test proves nothing")
	}

	addMember(t, env, room.ID, env.Bob.Email)
	for _, tt := range []struct {
		name string
		who  authority.Member
		text string
	}{
		{"bob's turn", env.Bob, "What did we say about the bands so far?"},
		{"alice's next turn", env.Alice, "What else about the engineering bands?"},
	} {
		before := len(model.Requests())
		done := completedBy(t, env, tt.who, room.ID, tt.text)
		if got := leaked(requestsText(t, model.Requests()[before:]), secrets); len(got) > 0 {
			t.Errorf("%s: the model was given %q of the bands", tt.name, got)
		}
		if got := leaked(contextsOf(t, env, done), secrets); len(got) > 0 {
			t.Errorf("%s: its model calls or answer carry %q of the bands", tt.name, got)
		}
	}
}

// compactsVerbatim summarises by returning the transcript it was given:
// whatever the summarised turns held, the summary holds.
func compactsVerbatim(_ context.Context, _ int, req gateway.Request) (*gateway.Result, error) {
	if req.Purpose == runtime.PurposeCompaction {
		return &gateway.Result{Text: "summary: " + req.Messages[len(req.Messages)-1].Content, FinishReason: "stop"}, nil
	}
	return nil, nil
}

// A room summary built while alice was alone in the room (and holding the
// bands) is not reused once bob joined: his turn starts from the turns
// every member may read, and the summary it makes for the room — of the
// new audience — holds nothing of the bands.
func TestSummaryOfAnEarlierAudienceIsNotReused(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	model := &testkit.ScriptModel{Script: compactsVerbatim}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	_, secrets := bands(t, env)
	room := soloRoom(t, env)
	env.Agent(t, "react", []string{tools.RetrievalName}, nil)
	for i := range 3 {
		completedBy(t, env, env.Alice, room.ID, fmt.Sprintf("note %d: %s", i, strings.Repeat("lorem ipsum ", 30)))
	}
	completedBy(t, env, env.Alice, room.ID, bandsQuestion)
	env.Agent(t, "react", nil, map[string]int64{"context_tokens": 200})
	completedBy(t, env, env.Alice, room.ID, "sum it up")
	s1, ok := env.RoomSummary(t, room.ID)
	if !ok || len(leaked(s1.Text, secrets)) == 0 {
		t.Fatalf("the summary alice's turn made holds nothing of the bands (%v): the test proves nothing: %.200q", ok, s1.Text)
	}

	addMember(t, env, room.ID, env.Bob.Email)
	before := len(model.Requests())
	bobs := completedBy(t, env, env.Bob, room.ID, "sum it up for me")
	if got := leaked(requestsText(t, model.Requests()[before:]), secrets); len(got) > 0 {
		t.Errorf("bob's turn was given %q of the bands", got)
	}
	for _, c := range env.CompactionsOf(t, room.ID, bobs.ID) {
		if c.Reused {
			t.Errorf("bob's turn started from the summary built for alice alone: %+v", c)
		}
	}
	s2, ok := env.RoomSummary(t, room.ID)
	if !ok || s2.Text == s1.Text {
		t.Fatalf("bob's turn made no summary of its own (%v)", ok)
	}
	if got := leaked(s2.Text, secrets); len(got) > 0 {
		t.Errorf("the room's new summary holds %q of the bands", got)
	}
	var stored, now int64
	if err := env.DB.QueryRow(`SELECT s.audience_version, c.audience_version FROM room_summaries s JOIN conversations c ON c.id = s.conversation_id
WHERE s.conversation_id = $1`, room.ID).Scan(&stored, &now); err != nil || stored != now {
		t.Errorf("the new summary is of audience version %d, the room's is %d (%v)", stored, now, err)
	}
}

// Revocation: once bob may no longer read the launch plan — his ACL entry
// removed, or he is taken out of the group the ACL names — the room's
// later model contexts leave out the turns that drew on it: their
// history, the room summary made of them, and history search, in the
// shared room and from bob's private room; and the room's summary is
// made again of what the room may still read.
func TestRevokedReaderLosesTheTurnsThatDrewOnADocument(t *testing.T) {
	t.Parallel()
	exec := func(t *testing.T, env *testkit.Env, query string, args ...any) {
		t.Helper()
		if _, err := env.DB.Exec(query, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		// setup makes bob a reader of the launch plan the way the case
		// takes it away; revoke takes it away.
		setup, revoke func(t *testing.T, env *testkit.Env, launch uuid.UUID)
	}{
		{name: "ACL entry removed",
			setup: func(*testing.T, *testkit.Env, uuid.UUID) {},
			revoke: func(t *testing.T, env *testkit.Env, launch uuid.UUID) {
				exec(t, env, `DELETE FROM document_acls WHERE principal = $1 AND document_id = $2`, env.Bob.Email, launch)
			}},
		{name: "removed from the group",
			setup: func(t *testing.T, env *testkit.Env, launch uuid.UUID) {
				exec(t, env, `INSERT INTO member_groups (id, member_id, name) VALUES ($1, $2, 'launch')`, uuid.New(), env.Bob.ID)
				exec(t, env, `UPDATE document_acls SET principal = 'group:launch' WHERE principal = $1 AND document_id = $2`, env.Bob.Email, launch)
			},
			revoke: func(t *testing.T, env *testkit.Env, _ uuid.UUID) {
				exec(t, env, `DELETE FROM member_groups WHERE member_id = $1 AND name = 'launch'`, env.Bob.ID)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := testkit.New(t)
			model := &testkit.ScriptModel{Script: compactsVerbatim}
			env.Runner(t, runner.Config{Gateway: model.Gateway()})
			launch, secrets := document(t, env, "Launch plan", "11 December", "10:00 UTC")
			tt.setup(t, env, launch)
			var readers int
			if err := env.DB.QueryRow(`SELECT count(*) FROM documents d WHERE d.id = $1 AND `+authority.AudienceReadableSQL("d.id", "$2"),
				launch, env.Shared.ID).Scan(&readers); err != nil || readers != 1 {
				t.Fatalf("the room's audience may not read the launch plan before the revocation (%v)", err)
			}
			env.Agent(t, "react", []string{tools.RetrievalName}, map[string]int64{"context_tokens": 8000})
			completedBy(t, env, env.Alice, env.Shared.ID, "note: "+strings.Repeat("lorem ipsum ", 30))
			asked := completedBy(t, env, env.Alice, env.Shared.ID, "When is the launch?")
			if len(leaked(*asked.Answer, secrets)) == 0 {
				t.Fatalf("the launch turn was not answered from the launch plan: %q", *asked.Answer)
			}
			env.Agent(t, "react", nil, map[string]int64{"context_tokens": 100})
			completedBy(t, env, env.Alice, env.Shared.ID, "ok, sum it up")
			if s, ok := env.RoomSummary(t, env.Shared.ID); !ok || len(leaked(s.Text, secrets)) == 0 {
				t.Fatalf("the room's summary holds nothing of the launch plan (%v): the test proves nothing", ok)
			}

			tt.revoke(t, env, launch)

			// A budget that makes the next turn summarise its history
			// again: the note alone, older than the stored summary.
			env.Agent(t, "react", []string{tools.HistorySearchName}, map[string]int64{"context_tokens": 100})
			for _, c := range []struct {
				name string
				who  authority.Member
				room uuid.UUID
			}{
				{"alice in the shared room", env.Alice, env.Shared.ID},
				{"bob in his private room", env.Bob, env.Private(t, env.Bob).ID},
			} {
				before := len(model.Requests())
				done := completedBy(t, env, c.who, c.room, "When was the launch again?")
				if got := leaked(requestsText(t, model.Requests()[before:]), secrets); len(got) > 0 {
					t.Errorf("%s: the model was given %q of the launch plan", c.name, got)
				}
				for _, comp := range env.CompactionsOf(t, c.room, done.ID) {
					if comp.Reused && c.room == env.Shared.ID {
						t.Errorf("%s: the turn started from the summary of the launch turn: %+v", c.name, comp)
					}
				}
			}
			// The summary no run of the room may start from any more is
			// replaced by the one of the readable history, though that
			// ends at an older position.
			if s, ok := env.RoomSummary(t, env.Shared.ID); !ok || len(leaked(s.Text, secrets)) > 0 || !strings.Contains(s.Text, "lorem") {
				t.Errorf("the room keeps a summary of the launch turn (%v): %.300q", ok, s.Text)
			}
		})
	}
}

// history_search finds a turn only when the searching member, and in a
// shared room every current member, may read all of its evidence: bob,
// who joined after alice asked about the bands, finds nothing of that
// turn from his private room, nor does alice inside the shared room now;
// alice, in her private room, still does.
func TestHistorySearchFindsOnlyTurnsTheAudienceMayRead(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	model := &testkit.ScriptModel{}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	_, secrets := bands(t, env)
	room := soloRoom(t, env)
	asked := completedBy(t, env, env.Alice, room.ID, bandsQuestion)
	addMember(t, env, room.ID, env.Bob.Email)

	env.Agent(t, "react", []string{tools.HistorySearchName}, nil)
	hit := "turn:" + asked.ID.String()
	// search returns what the model was given in the searching turn and
	// whether its search cited the bands turn.
	search := func(who authority.Member, room uuid.UUID) (string, bool) {
		t.Helper()
		before := len(model.Requests())
		done := completedBy(t, env, who, room, "What about the engineering bands?")
		found := false
		for _, e := range env.EntriesOf(t, room, done.ID, journal.KindToolCompleted) {
			var p journal.ToolCompletedPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			found = found || slices.Contains(p.Citations, hit)
		}
		return requestsText(t, model.Requests()[before:]), found
	}
	if given, found := search(env.Bob, env.Private(t, env.Bob).ID); found || len(leaked(given, secrets)) > 0 {
		t.Errorf("bob's search from his private room found the bands turn (%v): %q", found, leaked(given, secrets))
	}
	if given, found := search(env.Alice, room.ID); found || len(leaked(given, secrets)) > 0 {
		t.Errorf("alice's search in the shared room, bob a member, found the bands turn (%v): %q", found, leaked(given, secrets))
	}
	if given, found := search(env.Alice, env.Private(t, env.Alice).ID); !found || len(leaked(given, secrets)) == 0 {
		t.Error("alice's search from her private room no longer finds the bands turn she may read")
	}
}

// makesABandsFile retrieves, saves what it found as a file, then answers.
func makesABandsFile(_ context.Context, _ int, req gateway.Request) (*gateway.Result, error) {
	var results []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results = append(results, m.Content)
		}
	}
	switch {
	case len(req.Tools) == 0:
		return nil, nil
	case len(results) == 0:
		return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
			{ID: "call_1", Name: tools.RetrievalName, Arguments: `{"query":"engineering bands 2027"}`}}}, nil
	case len(results) == 1:
		args, _ := json.Marshal(map[string]string{"name": "bands.md", "content": results[0]})
		return &gateway.Result{FinishReason: "tool_calls", ToolCalls: []gateway.ToolCall{
			{ID: "call_2", Name: tools.CreateArtifactName, Arguments: string(args)}}}, nil
	}
	return nil, nil
}

// A file made in a turn derives from that turn's evidence: after bob
// joins, the file alice's solo bands turn made — linked to the room as
// its answer's artifact — is not found for him, like one that does not
// exist; alice still reads it, and an uploaded file the room references
// (made in no turn) stays readable to bob.
func TestArtifactOfATurnIsReadOnlyByWhoMayReadItsEvidence(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	env.Agent(t, "react", []string{tools.RetrievalName, tools.CreateArtifactName}, nil)
	model := &testkit.ScriptModel{Script: makesABandsFile}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	_, secrets := bands(t, env)
	room := soloRoom(t, env)
	asked := completedBy(t, env, env.Alice, room.ID, "Save the engineering bands as a file.")
	var p journal.AnswerPayload
	if err := json.Unmarshal(env.EntriesOf(t, room.ID, asked.ID, journal.KindTurnAnswer)[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Artifacts) != 1 || p.Artifacts[0].ResourceID == uuid.Nil {
		t.Fatalf("answer artifacts %+v, want one room reference", p.Artifacts)
	}
	file := p.Artifacts[0].ArtifactID
	if _, data, err := resource.ReadArtifact(ctx, env.Client, env.Alice.ID, file); err != nil || len(leaked(string(data), secrets)) == 0 {
		t.Fatalf("alice reads her file: %q, %v; want the bands in it", data, err)
	}
	uploaded, err := resource.CreateArtifact(ctx, env.Client, env.Alice.ID, uuid.Nil, "agenda.md", "", []byte("# agenda"))
	if err != nil {
		t.Fatal(err)
	}
	env.AddRoomReference(t, room.ID, uploaded.ID, uploaded.SHA256)

	addMember(t, env, room.ID, env.Bob.Email)
	if _, _, err := resource.ReadArtifact(ctx, env.Client, env.Bob.ID, file); !errors.Is(err, resource.ErrArtifactNotFound) {
		t.Errorf("bob reads the bands turn's file: %v, want not found", err)
	}
	if _, err := resource.StatArtifact(ctx, env.Client, env.Bob.ID, file); !errors.Is(err, resource.ErrArtifactNotFound) {
		t.Errorf("bob stats the bands turn's file: %v, want not found", err)
	}
	if _, _, err := resource.ReadArtifact(ctx, env.Client, env.Alice.ID, file); err != nil {
		t.Errorf("alice, its owner who may read the bands, lost her file: %v", err)
	}
	if _, _, err := resource.ReadArtifact(ctx, env.Client, env.Bob.ID, uploaded.ID); err != nil {
		t.Errorf("bob lost an uploaded file the room references: %v", err)
	}

	// Given as the input of alice's next turn in the room, bob a member
	// now, the file is not described to the model: a model context of the
	// room holds only what every member may read.
	before := len(model.Requests())
	attached, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: room.ID, Text: "Look at the files.",
		IdempotencyKey: uuid.NewString(), Artifacts: []uuid.UUID{file, uploaded.ID}})
	if err != nil {
		t.Fatal(err)
	}
	env.WaitTerminal(t, attached.ID)
	first := model.Requests()[before]
	system := first.Messages[0].Content
	if !strings.Contains(system, "artifact:"+file.String()+" (no longer available)") || strings.Contains(system, "bands.md") ||
		!strings.Contains(system, "agenda.md") {
		t.Errorf("the files described to the model in the room bob joined: %q", system)
	}
}

// The joiner mid-answer: a tool result's evidence is recorded before the
// model reads the result, so a member who joins while the answer is
// being written finds the turn's evidence complete — its answer is
// withheld at publication, and his own next turn there holds nothing of
// the bands.
func TestJoinerMidAnswerFindsTheEvidenceRecorded(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	bandsID, secrets := bands(t, env)
	room := soloRoom(t, env)
	var mu sync.Mutex // guards recorded and joinErr, set by the run
	var recorded []uuid.UUID
	var joinErr error
	model := &testkit.ScriptModel{Script: func(ctx context.Context, _ int, req gateway.Request) (*gateway.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		if last.Role != "tool" || recorded != nil {
			return nil, nil
		}
		// The model is about to read the retrieval's result: its
		// evidence must be on record already. Bob joins now.
		rows, err := env.DB.QueryContext(ctx, `SELECT document_id FROM turn_evidence WHERE conversation_id = $1`, room.ID)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		recorded = []uuid.UUID{}
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			recorded = append(recorded, id)
		}
		_, joinErr = env.Rooms.AddMember(ctx, env.Alice, room.ID.String(), env.Bob.Email)
		return nil, rows.Err()
	}}
	env.Runner(t, runner.Config{Gateway: model.Gateway()})
	asked := completedBy(t, env, env.Alice, room.ID, bandsQuestion)
	mu.Lock()
	got, err := recorded, joinErr
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, bandsID) {
		t.Fatalf("the model read the bands before they were the turn's evidence (recorded: %v)", got)
	}
	if asked.TerminalReason == nil || *asked.TerminalReason != "audience_withheld" {
		t.Fatalf("the answer bob joined during ended %v, want withheld", asked.TerminalReason)
	}
	before := len(model.Requests())
	bobs := completedBy(t, env, env.Bob, room.ID, "What did alice ask about the bands?")
	if got := leaked(requestsText(t, model.Requests()[before:])+contextsOf(t, env, bobs), secrets); len(got) > 0 {
		t.Errorf("bob's turn holds %q of the bands", got)
	}
}
