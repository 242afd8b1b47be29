package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/server"
)

// TestSubmitEmptySpecialistIsAbsent: genqlient (and other clients that
// send an unset optional string as "") submits specialist: "" — the
// server reads it as no specialist: the turn is accepted, routed to no
// one, even for bob, whose roster is empty; and "" and an omitted
// specialist are the same submission, so a retry with the other one
// returns the same turn rather than a CONFLICT.
func TestSubmitEmptySpecialistIsAbsent(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true }) // turns stay queued
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"].ID

	tests := []struct {
		name         string
		client       *gqlclient.Client
		first, retry any
	}{
		{"empty, then retried omitted", a, "", nil},
		{"omitted, then retried empty", a, nil, ""},
		{"empty from a member with no roster", b, "", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "empty-specialist-" + string(rune('a'+i))
			first, err := citationSubmitAs(ctx, tt.client, team, "When is the launch?", key, tt.first, nil, nil)
			if err != nil {
				t.Fatalf("submit with specialist %#v: %v", tt.first, err)
			}
			var route *string
			if err := h.DB.QueryRowContext(ctx, `SELECT specialist FROM turns WHERE id = $1`, first.ID).Scan(&route); err != nil {
				t.Fatal(err)
			}
			if route != nil && *route != "" {
				t.Fatalf("the turn is routed to %q, want no specialist", *route)
			}
			again, err := citationSubmitAs(ctx, tt.client, team, "When is the launch?", key, tt.retry, nil, nil)
			if err != nil {
				t.Fatalf("retry with specialist %#v: %v", tt.retry, err)
			}
			if again.ID != first.ID {
				t.Fatalf("the retry made turn %s, want %s", again.ID, first.ID)
			}
		})
	}
}

// journalBodyFields selects every member's fields of JournalEntry.body,
// beside the deprecated per-kind fields it replaces.
const journalBodyFields = `id seq kind
  body { __typename
    ... on TurnAccepted { authorId authorName }
    ... on TurnStart { attempt agentVersion recovered }
    ... on AnswerDelta { id turnId seq attempt offset text }
    ... on ToolRequested { callId name arguments }
    ... on ToolCompleted { callId name status bytes citationRefs }
    ... on ApprovalRequest { approvalId tool arguments expiresAt }
    ... on ApprovalDecisionRecord { approvalId state decidedBy }
    ... on SteerDelivered { commandId actorId text }
    ... on SteerRejected { commandId actorId text terminal { outcome reason } }
    ... on CheckpointRecord { steps toolCalls messages }
    ... on CompactionRecord { summarised tokensBefore tokensAfter through turns reused }
    ... on TurnAnswer { text citations { id ref } artifacts { id } }
    ... on TurnTerminal { outcome reason }
    ... on MemberJoined { memberId audienceVersion }
    ... on MemberLeft { memberId audienceVersion } }
  accepted { authorId authorName }
  started { attempt agentVersion recovered }
  delta { id turnId seq attempt offset text }
  tool { callId name arguments status bytes citations }
  approvalRequest { approvalId tool arguments expiresAt }
  approvalDecision { approvalId state decidedBy }
  steer { commandId actorId text }
  checkpoint { steps toolCalls messages }
  compaction { summarised tokensBefore tokensAfter through turns reused }
  answer { text citations { id ref } artifacts { id } }
  terminal { outcome reason }
  membership { memberId audienceVersion }`

// bodyEntry is a journal entry with its body and deprecated fields raw.
type bodyEntry map[string]json.RawMessage

// kindBodies is the body type of each journal kind, and the deprecated
// field that carried the kind before.
var kindBodies = map[string][2]string{
	"TURN_ACCEPTED":      {"TurnAccepted", "accepted"},
	"TURN_STARTED":       {"TurnStart", "started"},
	"ANSWER_DELTA":       {"AnswerDelta", "delta"},
	"TOOL_REQUESTED":     {"ToolRequested", "tool"},
	"TOOL_COMPLETED":     {"ToolCompleted", "tool"},
	"APPROVAL_REQUESTED": {"ApprovalRequest", "approvalRequest"},
	"APPROVAL_DECIDED":   {"ApprovalDecisionRecord", "approvalDecision"},
	"STEER_DELIVERED":    {"SteerDelivered", "steer"},
	"STEER_REJECTED":     {"SteerRejected", "steer"},
	"CHECKPOINT":         {"CheckpointRecord", "checkpoint"},
	"COMPACTION":         {"CompactionRecord", "compaction"},
	"TURN_ANSWER":        {"TurnAnswer", "answer"},
	"TURN_TERMINAL":      {"TurnTerminal", "terminal"},
	"MEMBER_JOINED":      {"MemberJoined", "membership"},
	"MEMBER_LEFT":        {"MemberLeft", "membership"},
}

// typesWorld is a Team room whose journal holds every kind: a real turn
// on the openai route whose model proposes a webhook that alice approves,
// a steered and cancelled turn, dave added and removed, and entries of
// the kinds no run here writes appended as a run writes them.
type typesWorld struct {
	h                    *servertest.Harness
	a, b, m, d           *gqlclient.Client
	room, turn, approval string
	artifact             string
	bobID                uuid.UUID
	decided              approvalView
}

func setupTypesWorld(t *testing.T, ctx context.Context) *typesWorld {
	t.Helper()
	rec := &approvalReceiver{}
	hook := httptest.NewServer(rec)
	t.Cleanup(hook.Close)
	llm := httptest.NewServer(&approvalModel{})
	t.Cleanup(llm.Close)
	h := servertest.New(t, func(c *server.Config) {
		c.OpenAI = gateway.OpenAIConfig{BaseURL: llm.URL, APIKey: "sk-local", Model: "local-model"}
		c.AgentRoute = "openai"
		c.Webhooks = map[string]string{"ops": hook.URL}
		c.ApprovalTimeout = 5 * time.Minute
	})
	w := &typesWorld{h: h, a: h.Client(t, alice), b: h.Client(t, bob), m: h.Client(t, mallory), d: h.Client(t, "dave@example.com")}
	aliceID, daveID := memberID(t, w.a), memberID(t, w.d)
	w.bobID = memberID(t, w.b)
	memberID(t, w.m) // mallory exists, in no room
	w.room = servertest.Rooms(t, w.a)["Team room"].ID
	room := uuid.MustParse(w.room)

	// A turn whose model proposes a webhook; alice approves it.
	w.turn = servertest.SubmitAs(t, ctx, w.a, w.room, "Tell ops to deploy v2.", "types-approval")
	for w.approval == "" {
		if _, approvals := approvalsOf(t, ctx, w.a, w.turn); len(approvals) == 1 {
			w.approval = approvals[0].ID
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no approval was requested")
		case <-time.After(20 * time.Millisecond):
		}
	}
	var err error
	if w.decided, err = decideAs(ctx, w.a, w.approval, "APPROVE"); err != nil {
		t.Fatal(err)
	}
	if done := servertest.AwaitTurnEnd(t, ctx, w.a, w.turn); done.State != "COMPLETED" {
		t.Fatalf("the approved turn ended %s", done.State)
	}

	// A turn steered, then cancelled: its steer is delivered or rejected.
	steered := servertest.SubmitAs(t, ctx, w.a, w.room, "Tell ops to deploy v3.", "types-steer")
	if _, err := steerAs(ctx, w.a, uuid.NewString(), steered, "shorter"); err != nil && gqlclient.CodeOf(err) != "CONFLICT" {
		t.Fatal(err)
	}
	if err := w.a.Do(ctx, `mutation($t: ID!, $c: ID!) { cancelTurn(input: {commandId: $c, turnId: $t}) { id } }`,
		map[string]any{"t": steered, "c": uuid.NewString()}, nil); err != nil && gqlclient.CodeOf(err) != "CONFLICT" {
		t.Fatal(err)
	}
	servertest.AwaitTurnEnd(t, ctx, w.a, steered)

	// Dave joins and leaves.
	for _, op := range []string{"addRoomMember", "removeRoomMember"} {
		if err := w.a.Do(ctx, `mutation($c: ID!) { `+op+`(input: {conversationId: $c, email: "dave@example.com"}) { id } }`,
			map[string]any{"c": w.room}, nil); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}

	// The kinds no run above wrote, appended as a run writes them.
	var seen []string
	rows, err := h.DB.QueryContext(ctx, `SELECT DISTINCT kind FROM journal_entries WHERE conversation_id = $1`, room)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, k)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	onTurn := uuid.NullUUID{UUID: uuid.MustParse(w.turn), Valid: true}
	byAlice := uuid.NullUUID{UUID: aliceID, Valid: true}
	drafts := map[journal.Kind]journal.Draft{
		journal.KindSteerDelivered: {Kind: journal.KindSteerDelivered, TurnID: onTurn, Attempt: 1, ActorID: byAlice,
			Payload: journal.SteerDeliveredPayload{CommandID: uuid.New(), ActorID: aliceID, Text: "shorter, please"}},
		journal.KindSteerRejected: {Kind: journal.KindSteerRejected, TurnID: onTurn, Attempt: 1, ActorID: byAlice,
			Payload: journal.SteerRejectedPayload{CommandID: uuid.New(), ActorID: aliceID, Text: "too late", Reason: journal.SteerRejectedTurnEnded,
				Outcome: "completed", TerminalReason: "completed"}},
		journal.KindCheckpoint: {Kind: journal.KindCheckpoint, TurnID: onTurn, Attempt: 1,
			Payload: journal.CheckpointPayload{Steps: 2, ToolCalls: 1, Messages: 5}},
		journal.KindCompaction: {Kind: journal.KindCompaction, TurnID: onTurn, Attempt: 1,
			Payload: journal.CompactionPayload{Summarised: 4, TokensBefore: 900, TokensAfter: 200}},
		journal.KindMemberJoined: {Kind: journal.KindMemberJoined, ActorID: byAlice, Payload: memberPayload(daveID, 9)},
		journal.KindMemberLeft:   {Kind: journal.KindMemberLeft, ActorID: byAlice, Payload: memberPayload(daveID, 10)},
	}
	var missing []journal.Draft
	for k, d := range drafts {
		if !slices.Contains(seen, string(k)) {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		if _, err := journal.Append(ctx, h.DB, room, nil, missing...); err != nil {
			t.Fatal(err)
		}
	}

	ref, err := resource.CreateArtifact(ctx, h.DB, aliceID, uuid.Nil, "findings.md", "", []byte("# Findings\n"))
	if err != nil {
		t.Fatal(err)
	}
	w.artifact = ref.ID.String()
	return w
}

func memberPayload(member uuid.UUID, version int64) room.MemberPayload {
	return room.MemberPayload{MemberID: member, AudienceVersion: version}
}

// TestJournalBodyOnEveryKind: every entry of a journal holding every
// kind carries a body whose __typename is its kind's own type, with the
// values the kind's deprecated field carries (which still answers), read
// alike from the journal query and from the subscription's replay.
func TestJournalBodyOnEveryKind(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := setupTypesWorld(t, ctx)

	var page struct {
		Journal struct{ Entries []bodyEntry } `json:"journal"`
	}
	if err := w.a.Do(ctx, `query($c: ID!) { journal(conversationId: $c, first: 500) { entries { `+journalBodyFields+` } } }`,
		map[string]any{"c": w.room}, &page); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range page.Journal.Entries {
		var kind string
		if err := json.Unmarshal(e["kind"], &kind); err != nil {
			t.Fatal(err)
		}
		kinds[kind]++
		want, ok := kindBodies[kind]
		if !ok {
			t.Fatalf("kind %s has no body type in this test", kind)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(e["body"], &body); err != nil || body == nil {
			t.Fatalf("%s entry %s has body %s", kind, e["id"], e["body"])
		}
		if got := strings.Trim(string(body["__typename"]), `"`); got != want[0] {
			t.Fatalf("%s entry's body is %s, want %s", kind, got, want[0])
		}
		var old map[string]json.RawMessage
		if err := json.Unmarshal(e[want[1]], &old); err != nil || old == nil {
			t.Fatalf("%s entry's deprecated %s is %s", kind, want[1], e[want[1]])
		}
		for f, v := range body {
			of := f
			switch f {
			case "__typename", "terminal":
				if kind == "STEER_REJECTED" || f == "__typename" {
					continue // the rejected steer's terminal is new
				}
			case "citationRefs":
				of = "citations"
			}
			if string(old[of]) != string(v) {
				t.Errorf("%s entry: body.%s = %s, deprecated %s.%s = %s", kind, f, v, want[1], of, old[of])
			}
		}
	}
	for k := range kindBodies {
		if kinds[k] == 0 {
			t.Errorf("no %s entry in the journal (kinds %v)", k, kinds)
		}
	}

	// The subscription replays the same entries, bodies and all.
	conn := w.h.Dial(t, ctx, w.a)
	defer conn.Close()
	msgs, err := conn.Subscribe(ctx, "bodies", gqlclient.Request{
		Query:     `subscription($c: ID!) { journal(conversationId: $c, after: 0) { ` + journalBodyFields + ` } }`,
		Variables: map[string]any{"c": w.room},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range page.Journal.Entries {
		got := servertest.NextJournal[bodyEntry](t, ctx, msgs)
		if string(got["id"]) != string(want["id"]) || string(got["body"]) != string(want["body"]) {
			t.Fatalf("the subscription replayed %s with body %s, the query %s with %s", got["id"], got["body"], want["id"], want["body"])
		}
	}
}

// nodeQuery reads any Node by id, with its type and id.
const nodeQuery = `query($id: ID!) { node(id: $id) { __typename id } }`

// TestNodeByID: node(id) reads each type with a global id — the
// conversation, a turn, an approval, a journal entry, a room member and
// an artifact — by the id its own id field gave, as the same type; to a
// viewer who may not read it (mallory, in no room; dave, who left; bob,
// for alice's artifact no room references) it is null with no error,
// exactly as for an id that names nothing or is not one.
func TestNodeByID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := setupTypesWorld(t, ctx)

	var page struct {
		Journal struct {
			Entries []struct{ ID, Kind string }
		} `json:"journal"`
	}
	if err := w.a.Do(ctx, `query($c: ID!) { journal(conversationId: $c, first: 500) { entries { id kind } } }`, map[string]any{"c": w.room}, &page); err != nil {
		t.Fatal(err)
	}
	entry := page.Journal.Entries[len(page.Journal.Entries)-1].ID
	member := w.room + ":" + w.bobID.String()

	type read struct {
		Node *struct {
			Typename string `json:"__typename"`
			ID       string `json:"id"`
		} `json:"node"`
	}
	nodeAs := func(c *gqlclient.Client, id string) (*read, error) {
		resp, err := c.Raw(ctx, gqlclient.Request{Query: nodeQuery, Variables: map[string]any{"id": id}})
		if err != nil {
			return nil, err
		}
		if err := resp.Err(); err != nil {
			return nil, err
		}
		var out read
		return &out, json.Unmarshal(resp.Data, &out)
	}
	tests := []struct {
		name     string
		id       string
		typename string
		readers  []*gqlclient.Client
		outside  []*gqlclient.Client
	}{
		{"conversation", w.room, "Conversation", []*gqlclient.Client{w.a, w.b}, []*gqlclient.Client{w.m, w.d}},
		{"turn", w.turn, "Turn", []*gqlclient.Client{w.a, w.b}, []*gqlclient.Client{w.m, w.d}},
		{"approval", w.approval, "Approval", []*gqlclient.Client{w.a, w.b}, []*gqlclient.Client{w.m, w.d}},
		{"journal entry", entry, "JournalEntry", []*gqlclient.Client{w.a, w.b}, []*gqlclient.Client{w.m, w.d}},
		{"room member", member, "RoomMember", []*gqlclient.Client{w.a, w.b}, []*gqlclient.Client{w.m, w.d}},
		{"artifact", w.artifact, "Artifact", []*gqlclient.Client{w.a}, []*gqlclient.Client{w.b, w.m}},
		{"an unknown uuid", uuid.NewString(), "", nil, []*gqlclient.Client{w.a}},
		{"an entry past the head", w.room + ":100000", "", nil, []*gqlclient.Client{w.a}},
		{"an entry at 0", w.room + ":0", "", nil, []*gqlclient.Client{w.a}},
		{"a member not in the room", w.room + ":" + uuid.NewString(), "", nil, []*gqlclient.Client{w.a}},
		{"an id in capitals", strings.ToUpper(w.turn), "", nil, []*gqlclient.Client{w.a}},
		{"not an id at all", "nope", "", nil, []*gqlclient.Client{w.a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range tt.readers {
				got, err := nodeAs(c, tt.id)
				if err != nil {
					t.Fatal(err)
				}
				if got.Node == nil || got.Node.Typename != tt.typename || got.Node.ID != tt.id {
					t.Fatalf("node(%s) = %+v, want the %s", tt.id, got.Node, tt.typename)
				}
			}
			for i, c := range tt.outside {
				got, err := nodeAs(c, tt.id)
				if err != nil {
					t.Fatalf("outsider %d: %v, want null and no error", i, err)
				}
				if got.Node != nil {
					t.Fatalf("outsider %d reads node(%s) = %+v, want null", i, tt.id, got.Node)
				}
			}
		})
	}

	// A node reads as its type's own read does: the turn's fields, the
	// approval's decision.
	var turn struct {
		Node struct {
			State  string `json:"state"`
			Answer string `json:"answer"`
		} `json:"node"`
	}
	if err := w.b.Do(ctx, `query($id: ID!) { node(id: $id) { ... on Turn { state answer } } }`, map[string]any{"id": w.turn}, &turn); err != nil {
		t.Fatal(err)
	}
	if turn.Node.State != "COMPLETED" || turn.Node.Answer != "Ops was told to deploy v2." {
		t.Fatalf("bob reads the turn node %+v", turn.Node)
	}
	var approval struct {
		Node struct {
			TurnID string `json:"turnId"`
			State  string `json:"state"`
		} `json:"node"`
	}
	if err := w.b.Do(ctx, `query($id: ID!) { node(id: $id) { ... on Approval { turnId state } } }`, map[string]any{"id": w.approval}, &approval); err != nil {
		t.Fatal(err)
	}
	if approval.Node.TurnID != w.turn || approval.Node.State != "APPROVED" {
		t.Fatalf("bob reads the approval node %+v", approval.Node)
	}
	if w.decided.State != "APPROVED" {
		t.Fatalf("decideApproval answered state %q, want APPROVED", w.decided.State)
	}
}

// TestCommandResultsAreEnums: steerTurn's and decideApproval's results
// carry their state as enums (CommandState, ApprovalState), so typed
// clients get a closed set of values, not a String; a steer of a queued
// turn answers PENDING.
func TestCommandResultsAreEnums(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true }) // turns stay queued
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	var types struct {
		Steer, Approval struct {
			Fields []struct {
				Name string
				Type struct {
					Kind   string
					OfType struct{ Kind, Name string } `json:"ofType"`
				}
			}
		}
	}
	if err := a.Do(ctx, `{ steer: __type(name: "SteerResult") { fields { name type { kind ofType { kind name } } } }
  approval: __type(name: "Approval") { fields { name type { kind ofType { kind name } } } } }`, nil, &types); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		what   string
		fields []struct {
			Name string
			Type struct {
				Kind   string
				OfType struct{ Kind, Name string } `json:"ofType"`
			}
		}
		enum string
	}{
		{"SteerResult.state", types.Steer.Fields, "CommandState"},
		{"Approval.state", types.Approval.Fields, "ApprovalState"},
	} {
		found := false
		for _, f := range tt.fields {
			if f.Name == "state" {
				found = true
				if f.Type.Kind != "NON_NULL" || f.Type.OfType.Kind != "ENUM" || f.Type.OfType.Name != tt.enum {
					t.Errorf("%s is %+v, want %s!", tt.what, f.Type, tt.enum)
				}
			}
		}
		if !found {
			t.Errorf("%s is missing", tt.what)
		}
	}
	team := servertest.Rooms(t, a)["Team room"].ID
	queued := servertest.SubmitAs(t, ctx, a, team, "steer me", "enum-steer")
	got, err := steerAs(ctx, a, uuid.NewString(), queued, "shorter")
	if err != nil {
		t.Fatal(err)
	}
	if got.SteerTurn.State != "PENDING" {
		t.Fatalf("steerTurn answered state %q, want PENDING", got.SteerTurn.State)
	}
}
