package server_test

import (
	"context"
	"strings"
	"time"

	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// dbCounts is what a rejected request must leave unchanged.
type dbCounts struct{ Turns, Entries, Heads, Members, Rooms int64 }

func counts(t *testing.T, h *servertest.Harness) dbCounts {
	t.Helper()
	var c dbCounts
	err := h.DB.QueryRow(`SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM journal_entries),
		(SELECT COALESCE(sum(next_seq), 0) FROM conversations), (SELECT count(*) FROM room_members),
		(SELECT count(*) FROM conversations)`).Scan(&c.Turns, &c.Entries, &c.Heads, &c.Members, &c.Rooms)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBadInputWritesNothing: each bad input gets its extensions.code and
// leaves the database as it was.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.MaxTextLen = 50 })
	ctx := context.Background()
	a := h.Client(t, alice)
	aliceRooms := servertest.Rooms(t, a)
	team := aliceRooms["Team room"].ID
	bobsNotes := servertest.Rooms(t, h.Client(t, bob))["Bob's notes"].ID
	// A first submission, so the same key can be retried with other text.
	if err := a.Do(ctx, servertest.SubmitMutation, map[string]any{"c": team, "t": "first", "k": "key-1"}, nil); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, h, team)

	tests := []struct {
		name   string
		client *gqlclient.Client
		query  string
		vars   map[string]any
		code   string
	}{
		{"empty text", a, servertest.SubmitMutation, map[string]any{"c": team, "t": "", "k": "key-2"}, "BAD_USER_INPUT"},
		{"blank text", a, servertest.SubmitMutation, map[string]any{"c": team, "t": " \n\t ", "k": "key-2"}, "BAD_USER_INPUT"},
		{"text over the limit", a, servertest.SubmitMutation, map[string]any{"c": team, "t": strings.Repeat("x", 51), "k": "key-2"}, "BAD_USER_INPUT"},
		{"key with a space", a, servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": "two words"}, "BAD_USER_INPUT"},
		{"empty key", a, servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": ""}, "BAD_USER_INPUT"},
		{"key too long", a, servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": strings.Repeat("k", 129)}, "BAD_USER_INPUT"},
		{"same key, other text", a, servertest.SubmitMutation, map[string]any{"c": team, "t": "second", "k": "key-1"}, "CONFLICT"},
		{"room the member is not in", a, servertest.SubmitMutation, map[string]any{"c": bobsNotes, "t": "hi", "k": "key-3"}, "NOT_FOUND"},
		{"no such room", a, servertest.SubmitMutation, map[string]any{"c": "00000000-0000-0000-0000-000000000000", "t": "hi", "k": "key-4"}, "NOT_FOUND"},
		{"no envelope", h.ClientWithToken(""), servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": "key-5"}, "UNAUTHENTICATED"},
		{"blank title", a, `mutation { createConversation(input: {title: "  ", kind: SHARED}) { id } }`, nil, "BAD_USER_INPUT"},
		{"unknown agent", a, `mutation { createConversation(input: {title: "x", kind: SHARED, agent: "nobody"}) { id } }`, nil, "BAD_USER_INPUT"},
		{"add a non-email", a, `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "not-an-email"}) { id } }`, map[string]any{"c": team}, "BAD_USER_INPUT"},
		{"add by a non-owner", h.Client(t, bob), `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "carol@example.com"}) { id } }`, map[string]any{"c": team}, "FORBIDDEN"},
		{"remove by a non-owner", h.Client(t, bob), `mutation($c: ID!) { removeRoomMember(input: {conversationId: $c, email: "alice@example.com"}) { id } }`, map[string]any{"c": team}, "FORBIDDEN"},
		{"add an unknown member", a, `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "nobody@example.com"}) { id } }`, map[string]any{"c": team}, "NOT_FOUND"},
		{"journal page too big", a, `query($c: ID!) { journal(conversationId: $c, first: 100000) { head } }`, map[string]any{"c": team}, "BAD_USER_INPUT"},
		{"negative position", a, `query($c: ID!) { journal(conversationId: $c, after: -1) { head } }`, map[string]any{"c": team}, "BAD_USER_INPUT"},
		{"malformed turn id", a, `{ turn(id: "nope") { id } }`, nil, "BAD_USER_INPUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := counts(t, h)
			err := tt.client.Do(ctx, tt.query, tt.vars, nil)
			if code := gqlclient.CodeOf(err); code != tt.code {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
			if after := counts(t, h); after != before {
				t.Fatalf("database changed: before %+v, after %+v", before, after)
			}
		})
	}
}

// waitIdle waits until the room has no queued or running turn.
func waitIdle(t *testing.T, h *servertest.Harness, room string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var busy bool
		if err := h.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE conversation_id = $1 AND state IN ('queued', 'running'))`, room).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if !busy {
			return
		}
		wake := server.HubOf(h.App).Wait(uuid.MustParse(room))
		var still bool
		if err := h.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE conversation_id = $1 AND state IN ('queued', 'running'))`, room).Scan(&still); err != nil {
			t.Fatal(err)
		}
		if !still {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("room %s still busy at the deadline", room)
		}
	}
}

// TestCancelTurnMutation: cancelTurn over GraphQL — its refusals carry
// their codes and change nothing, and the author's cancel of a queued turn
// ends it CANCELLED with one terminal, whatever the retries.
func TestCancelTurnMutation(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true }) // turns stay queued
	ctx := context.Background()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	turnID := servertest.SubmitAs(t, ctx, a, team, "cancel me", "cancel-1")
	cancel := `mutation($c: ID!, $t: ID!) { cancelTurn(input: {commandId: $c, turnId: $t}) { state terminalReason } }`
	cmd := "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11"
	tests := []struct {
		name   string
		client *gqlclient.Client
		vars   map[string]any
		code   string
	}{
		{"malformed command id", a, map[string]any{"c": "not-a-uuid", "t": turnID}, "BAD_USER_INPUT"},
		{"malformed turn id", a, map[string]any{"c": cmd, "t": "nope"}, "BAD_USER_INPUT"},
		{"neither author nor owner", h.Client(t, bob), map[string]any{"c": cmd, "t": turnID}, "FORBIDDEN"},
		{"not a member", h.Client(t, mallory), map[string]any{"c": cmd, "t": turnID}, "NOT_FOUND"},
		{"no envelope", h.ClientWithToken(""), map[string]any{"c": cmd, "t": turnID}, "UNAUTHENTICATED"},
	}
	for _, tt := range tests {
		before := counts(t, h)
		if err := tt.client.Do(ctx, cancel, tt.vars, nil); gqlclient.CodeOf(err) != tt.code {
			t.Errorf("%s: err = %v, want %s", tt.name, err, tt.code)
		}
		if after := counts(t, h); after != before {
			t.Errorf("%s changed the database", tt.name)
		}
	}
	for range 2 { // a retry converges
		var out struct {
			CancelTurn struct {
				State          string
				TerminalReason *string
			} `json:"cancelTurn"`
		}
		if err := a.Do(ctx, cancel, map[string]any{"c": cmd, "t": turnID}, &out); err != nil || out.CancelTurn.State != "CANCELLED" {
			t.Fatalf("cancel: %+v, %v", out, err)
		}
	}
	var terminals int
	if err := h.DB.QueryRow(`SELECT count(*) FROM journal_entries WHERE turn_id = $1 AND kind = 'turn_terminal'`, turnID).Scan(&terminals); err != nil || terminals != 1 {
		t.Fatalf("%d terminals (%v), want 1", terminals, err)
	}
}

// TestErrorsNeverEchoInput: an error names the field at fault, never the
// value the client sent — ids, idempotency keys, command ids, emails,
// slugs, names or text — through every path that refuses one. Each case
// sends a distinctive value and checks its code, that no error message
// carries the value, and that nothing changed.
func TestErrorsNeverEchoInput(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) {
		c.NoRunner = true            // turns stay queued
		c.Limits = unlimitedCommands // alice sends more mutations than a bucket holds
	})
	ctx := context.Background()
	a, m := h.Client(t, alice), h.Client(t, mallory)
	team := servertest.Rooms(t, a)["Team room"].ID
	ended := servertest.SubmitAs(t, ctx, a, team, "to be cancelled", "echo-ended")
	queued := servertest.SubmitAs(t, ctx, a, team, "stays queued", "echo-queued")
	cancelQ := `mutation($c: ID!, $t: ID!) { cancelTurn(input: {commandId: $c, turnId: $t}) { id } }`
	steerQ := `mutation($c: ID!, $t: ID!) { steerTurn(input: {commandId: $c, turnId: $t, text: "go on"}) { commandId } }`
	usedCommand := uuid.NewString()
	if err := a.Do(ctx, cancelQ, map[string]any{"c": usedCommand, "t": ended}, nil); err != nil {
		t.Fatal(err)
	}
	const key = "EchoMarkerKey-7Q"
	if err := a.Do(ctx, servertest.SubmitMutation, map[string]any{"c": team, "t": "keyed", "k": key}, nil); err != nil {
		t.Fatal(err)
	}
	submitWith := `mutation($c: ID!, $t: String!, $k: String!, $s: String, $a: [ID!]) {
  submitMessage(input: {conversationId: $c, text: $t, idempotencyKey: $k, specialist: $s, artifactIds: $a}) { id } }`
	createAgent := func(field string) string {
		v := map[string]string{"controller": `"react"`, "modelRoute": `"builtin"`}
		switch field {
		case "controller":
			v["controller"] = `"echo-marker-controller"`
		case "modelRoute":
			v["modelRoute"] = `"echo-marker-route"`
		case "tools":
			v["tools"] = `["retrieval", "echo-marker-tool"]`
		case "specialists":
			v["specialists"] = `["researcher", "Echo Marker Specialist"]`
		case "budgets":
			v["budgets"] = `{max_steps: 3, echo_marker_budget: 1}`
		}
		var parts []string
		for k, val := range v {
			parts = append(parts, k+": "+val)
		}
		return `mutation { createAgent(input: {slug: "echo-agent", name: "Echo", version: {` + strings.Join(parts, ", ") + `}}) { id } }`
	}
	unknown := uuid.NewString()
	tests := []struct {
		name   string
		client *gqlclient.Client
		query  string
		vars   map[string]any
		code   string
		echo   string // the value no message may carry
	}{
		{"no such turn", a, `query($id: ID!) { turn(id: $id) { id } }`, map[string]any{"id": unknown}, "NOT_FOUND", unknown},
		{"a turn of another's room", m, `query($id: ID!) { turn(id: $id) { id } }`, map[string]any{"id": queued}, "NOT_FOUND", queued},
		{"resume no such turn", a, `mutation($id: ID!) { resumeTurn(input: {turnId: $id}) { id } }`, map[string]any{"id": unknown}, "NOT_FOUND", unknown},
		{"cancel another's turn", m, cancelQ, map[string]any{"c": uuid.NewString(), "t": queued}, "NOT_FOUND", queued},
		{"cancel an ended turn", a, cancelQ, map[string]any{"c": uuid.NewString(), "t": ended}, "CONFLICT", ended},
		{"steer an ended turn", a, steerQ, map[string]any{"c": uuid.NewString(), "t": ended}, "CONFLICT", ended},
		{"a command id used for another turn", a, cancelQ, map[string]any{"c": usedCommand, "t": queued}, "CONFLICT", usedCommand},
		{"a command id used for another kind", a, steerQ, map[string]any{"c": usedCommand, "t": ended}, "CONFLICT", usedCommand},
		{"no such approval", a, `mutation($id: ID!) { decideApproval(input: {approvalId: $id, decision: APPROVE}) { id } }`, map[string]any{"id": unknown}, "NOT_FOUND", unknown},
		{"no such artifact", a, `query($id: ID!) { artifact(id: $id) { id } }`, map[string]any{"id": unknown}, "NOT_FOUND", unknown},
		{"a key reused with other text", a, submitWith, map[string]any{"c": team, "t": "other text", "k": key}, "CONFLICT", key},
		{"a key reused with a specialist", a, submitWith, map[string]any{"c": team, "t": "keyed", "k": key, "s": "researcher"}, "CONFLICT", key},
		{"a specialist outside the roster", a, submitWith, map[string]any{"c": team, "t": "hi", "k": "echo-2", "s": "echo-marker-specialist"}, "FORBIDDEN", "echo-marker-specialist"},
		{"an artifact not found", a, submitWith, map[string]any{"c": team, "t": "hi", "k": "echo-3", "a": []string{unknown}}, "NOT_FOUND", unknown},
		{"no such agent for a room", a, `mutation { createConversation(input: {title: "x", kind: SHARED, agent: "echo-marker-agent"}) { id } }`, nil, "BAD_USER_INPUT", "echo-marker-agent"},
		{"add an unknown member", a, `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "echo.marker@example.com"}) { id } }`, map[string]any{"c": team}, "NOT_FOUND", "echo.marker"},
		{"remove an unknown member", a, `mutation($c: ID!) { removeRoomMember(input: {conversationId: $c, email: "echo.marker@example.com"}) { id } }`, map[string]any{"c": team}, "NOT_FOUND", "echo.marker"},
		{"a reader that is no email", a, `mutation { addDocument(input: {title: "T", body: "B", readers: ["alice@example.com", "echo-marker-reader"]}) { id } }`, nil, "BAD_USER_INPUT", "echo-marker-reader"},
		{"a reader group of a bad name", a, `mutation { addDocument(input: {title: "T", body: "B", readers: ["group:Echo-Marker-Group"]}) { id } }`, nil, "BAD_USER_INPUT", "Echo-Marker-Group"},
		{"replace no such document", a, `mutation($id: ID!) { replaceDocument(input: {documentId: $id, body: "B"}) { id } }`, map[string]any{"id": unknown}, "NOT_FOUND", unknown},
		{"readers of no such document", a, `mutation($id: ID!) { setDocumentReaders(input: {documentId: $id, readers: []}) { id } }`, map[string]any{"id": unknown}, "NOT_FOUND", unknown},
		{"delete no such document", a, `mutation($id: ID!) { deleteDocument(input: {documentId: $id}) }`, map[string]any{"id": unknown}, "NOT_FOUND", unknown},
		{"grant to no such member", a, `mutation { grantPermission(input: {email: "echo.marker@example.com", permission: "documents.read"}) { id } }`, nil, "NOT_FOUND", "echo.marker"},
		{"a bad permission name", a, `mutation { grantPermission(input: {email: "bob@example.com", permission: "Echo Marker Permission"}) { id } }`, nil, "BAD_USER_INPUT", "Echo Marker Permission"},
		{"a bad group name", a, `mutation { addGroupMember(input: {email: "bob@example.com", group: "Echo Marker Group"}) { id } }`, nil, "BAD_USER_INPUT", "Echo Marker Group"},
		{"an agent that exists", a, `mutation { createAgent(input: {slug: "assistant", name: "Echo", version: {controller: "react", modelRoute: "builtin"}}) { id } }`, nil, "CONFLICT", "assistant"},
		{"an unknown controller", a, createAgent("controller"), nil, "BAD_USER_INPUT", "echo-marker-controller"},
		{"an unknown model route", a, createAgent("modelRoute"), nil, "BAD_USER_INPUT", "echo-marker-route"},
		{"an unknown tool", a, createAgent("tools"), nil, "BAD_USER_INPUT", "echo-marker-tool"},
		{"a bad specialist slug", a, createAgent("specialists"), nil, "BAD_USER_INPUT", "Echo Marker Specialist"},
		{"an unknown budget", a, createAgent("budgets"), nil, "BAD_USER_INPUT", "echo_marker_budget"},
		{"a version of no such agent", a, `mutation { addAgentVersion(input: {slug: "echo-marker-slug", version: {controller: "react", modelRoute: "builtin"}}) { id } }`, nil, "NOT_FOUND", "echo-marker-slug"},
		{"a roster of no such agent", a, `mutation { setMemberRoster(input: {email: "alice@example.com", agent: "echo-marker-slug", specialists: []}) { id } }`, nil, "NOT_FOUND", "echo-marker-slug"},
		{"a roster of a bad slug", a, `mutation { setMemberRoster(input: {email: "alice@example.com", agent: "assistant", specialists: ["Echo Marker Slug"]}) { id } }`, nil, "BAD_USER_INPUT", "Echo Marker Slug"},
		{"a roster for no such member", a, `mutation { setMemberRoster(input: {email: "echo.marker@example.com", agent: "assistant", specialists: []}) { id } }`, nil, "NOT_FOUND", "echo.marker"},
		{"a kind that does not exist", a, `mutation($k: ConversationKind!) { createConversation(input: {title: "x", kind: $k}) { id } }`, map[string]any{"k": "ECHOMARKERKIND"}, "GRAPHQL_VALIDATION_FAILED", "ECHOMARKERKIND"},
		{"a string for a number", a, `query($c: ID!, $f: Int) { journal(conversationId: $c, first: $f) { head } }`, map[string]any{"c": team, "f": "echo-marker-number"}, "GRAPHQL_VALIDATION_FAILED", "echo-marker-number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, adminBefore := counts(t, h), servertest.AdminState(t, h)
			res, err := tt.client.Raw(ctx, gqlclient.Request{Query: tt.query, Variables: tt.vars})
			if err != nil {
				t.Fatal(err)
			}
			servertest.CheckCoded(t, res.Errors, tt.code)
			for _, e := range res.Errors {
				if strings.Contains(strings.ToLower(e.Message), strings.ToLower(tt.echo)) {
					t.Errorf("the error echoes %q: %s", tt.echo, e.Message)
				}
			}
			if after := counts(t, h); after != before {
				t.Errorf("database changed: %+v -> %+v", before, after)
			}
			if after := servertest.AdminState(t, h); after != adminBefore {
				t.Errorf("admin state changed:\n%s\n%s", adminBefore, after)
			}
		})
	}
}
