package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/server"
)

// TestNonMemberSeesNothing: someone who is not in a room cannot read it,
// its journal, its turns, subscribe to it or submit into it; each is the
// same NOT_FOUND as a room that does not exist.
func TestNonMemberSeesNothing(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, a, team.ID, "for members only", "members-1")
	waitIdle(t, h, team.ID)
	m := h.Client(t, mallory)
	if got := servertest.Rooms(t, m); len(got) != 0 {
		t.Fatalf("mallory lists rooms %v", got)
	}
	before := counts(t, h)
	for _, ref := range []string{team.ID, team.PublicKey, team.Channel} {
		checks := []struct {
			name  string
			query string
			vars  map[string]any
		}{
			{"conversation", `query($c: ID!) { conversation(id: $c) { id } }`, map[string]any{"c": ref}},
			{"journal", `query($c: ID!) { journal(conversationId: $c) { head } }`, map[string]any{"c": ref}},
			{"submit", servertest.SubmitMutation, map[string]any{"c": ref, "t": "let me in", "k": "mallory-1"}},
		}
		for _, c := range checks {
			if err := m.Do(ctx, c.query, c.vars, nil); gqlclient.CodeOf(err) != "NOT_FOUND" {
				t.Errorf("%s by %q: err = %v, want NOT_FOUND", c.name, ref, err)
			}
		}
	}
	if err := m.Do(ctx, `query($id: ID!) { turn(id: $id) { id } }`, map[string]any{"id": turnID}, nil); gqlclient.CodeOf(err) != "NOT_FOUND" {
		t.Errorf("turn: err = %v, want NOT_FOUND", err)
	}
	hdr := http.Header{}
	hdr.Set(h.Config.IdentityHeader, m.Header.Get(h.Config.IdentityHeader))
	assertSubscriptionCode(t, h, hdr, nil, "NOT_FOUND")
	if after := counts(t, h); after != before {
		t.Fatalf("database changed: before %+v, after %+v", before, after)
	}
}

// TestScopeResolverMatchesCompleteNamesOnly: a room is found by its UUID,
// its WEB_ channel and its public key, and by nothing that differs from
// them by a prefix or a suffix.
func TestScopeResolverMatchesCompleteNamesOnly(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"]
	get := `query($c: ID!) { conversation(id: $c) { id } }`
	for _, ref := range []string{team.ID, team.Channel, team.PublicKey} {
		var out struct {
			Conversation struct{ ID string } `json:"conversation"`
		}
		if err := a.Do(ctx, get, map[string]any{"c": ref}, &out); err != nil || out.Conversation.ID != team.ID {
			t.Fatalf("conversation(%q) = %+v, %v; want %s", ref, out, err, team.ID)
		}
	}
	for _, ref := range []string{
		team.PublicKey + "x", team.PublicKey + "-task-1", team.PublicKey[:len(team.PublicKey)-1],
		team.Channel + "0", team.Channel[:len(team.Channel)-1], "x" + team.Channel,
		strings.ToUpper(team.PublicKey), team.ID + "0", "",
	} {
		err := a.Do(ctx, get, map[string]any{"c": ref}, nil)
		if code := gqlclient.CodeOf(err); code != "NOT_FOUND" {
			t.Errorf("conversation(%q): err = %v, want NOT_FOUND", ref, err)
		}
	}
}

// TestRemovedMemberStreamEnds: removing a member bumps the audience
// version, and the removed member's journal stream ends without showing
// anything of the room after the removal.
func TestRemovedMemberStreamEnds(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"]
	conn := h.Dial(t, ctx, b)
	defer conn.Close()
	msgs, err := conn.Subscribe(ctx, "b", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": team.ID, "after": team.Head}})
	if err != nil {
		t.Fatal(err)
	}
	var removed struct {
		RemoveRoomMember struct{ AudienceVersion int64 } `json:"removeRoomMember"`
	}
	if err := a.Do(ctx, `mutation($c: ID!) { removeRoomMember(input: {conversationId: $c, email: "bob@example.com"}) { audienceVersion } }`,
		map[string]any{"c": team.ID}, &removed); err != nil {
		t.Fatal(err)
	}
	if removed.RemoveRoomMember.AudienceVersion < 3 { // created 1, bob added 2, bob removed 3
		t.Fatalf("audience version %d after removal, want ≥ 3", removed.RemoveRoomMember.AudienceVersion)
	}
	// Alice keeps talking; bob must not see it.
	if err := a.Do(ctx, servertest.SubmitMutation, map[string]any{"c": team.ID, "t": "after bob left", "k": "after-bob"}, nil); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatal("connection ended instead of the subscription completing")
			}
			if m.Type == "complete" {
				if err := b.Do(ctx, `query($c: ID!) { conversation(id: $c) { id } }`, map[string]any{"c": team.ID}, nil); gqlclient.CodeOf(err) != "NOT_FOUND" {
					t.Fatalf("bob reads the room after removal: %v", err)
				}
				return
			}
			if strings.Contains(string(m.Payload), "after bob left") || strings.Contains(string(m.Payload), "TURN_ACCEPTED") {
				t.Fatalf("removed member saw %s", m.Payload)
			}
		case <-ctx.Done():
			t.Fatal("the removed member's stream did not end")
		}
	}
}

// TestHealthzAndExplorer: /healthz answers while the database does, and
// the explorer at /graphiql/ (and the chat at /) come with the demo
// envelope pre-filled in dev mode.
func TestHealthzAndExplorer(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	res, err := http.Get(h.Base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/healthz: HTTP %d", res.StatusCode)
	}
	for _, path := range []string{"/graphiql/", "/"} {
		res, err = http.Get(h.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), h.Config.IdentityHeader) {
			t.Fatalf("explorer %s: HTTP %d, identity header pre-filled: %v", path, res.StatusCode, strings.Contains(string(body), h.Config.IdentityHeader))
		}
	}
}

// TestNonMemberLearnsNothingFromIDs: to someone who is not a member, every
// resolver answers for a room, turn, approval or artifact that exists
// exactly as for a made-up one of the same form — the same code and the
// same message (the id the caller sent aside) — so no answer tells that
// something exists. Nothing is written either way.
func TestNonMemberLearnsNothingFromIDs(t *testing.T) {
	t.Parallel()
	// Mallory sends more mutations than her command bucket holds (each
	// counts): the budget is tested apart, this is about what they answer.
	h := servertest.New(t, func(c *server.Config) { c.Limits = unlimitedCommands })
	ctx := context.Background()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, a, team.ID, "for members only", "oracle-1")
	waitIdle(t, h, team.ID)
	var taskID, approvalID uuid.UUID = uuid.New(), uuid.New()
	if _, err := h.DB.ExecContext(ctx, `INSERT INTO tasks (id, conversation_id, title, updated_at, owner_id)
SELECT $1, $2, 'a task', now(), owner_id FROM conversations WHERE id = $2`, taskID, team.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.DB.ExecContext(ctx, `INSERT INTO approvals (id, conversation_id, turn_id, call_id, tool, arguments, expires_at)
VALUES ($1, $2, $3, 'call_1', 'send_webhook', '{}', now() + interval '1 hour')`, approvalID, team.ID, turnID); err != nil {
		t.Fatal(err)
	}
	art, err := resource.CreateArtifact(ctx, h.DB, memberID(t, a), uuid.Nil, "mine.txt", "", []byte("alice's"))
	if err != nil {
		t.Fatal(err)
	}
	teamID := uuid.MustParse(team.ID)
	newRoom := uuid.New()
	rooms := []struct{ real, fake string }{
		{team.ID, newRoom.String()},
		{team.PublicKey, room.NewPublicKey()},
		{team.Channel, room.Channel(newRoom)},
		{team.ID + authority.TaskSeparator + taskID.String(), teamID.String() + authority.TaskSeparator + uuid.NewString()},
		{team.PublicKey + authority.TaskSeparator + taskID.String(), room.NewPublicKey() + authority.TaskSeparator + taskID.String()},
	}
	type op struct {
		name, query string
		vars        func(id string) map[string]any
	}
	roomOps := []op{
		{"conversation", `query($c: ID!) { conversation(id: $c) { id } }`, func(id string) map[string]any { return map[string]any{"c": id} }},
		{"journal", `query($c: ID!) { journal(conversationId: $c) { head } }`, func(id string) map[string]any { return map[string]any{"c": id} }},
		{"submitMessage", servertest.SubmitMutation, func(id string) map[string]any { return map[string]any{"c": id, "t": "let me in", "k": "mallory-1"} }},
		{"addRoomMember", `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "mallory@example.com"}) { id } }`,
			func(id string) map[string]any { return map[string]any{"c": id} }},
		{"removeRoomMember", `mutation($c: ID!) { removeRoomMember(input: {conversationId: $c, email: "bob@example.com"}) { id } }`,
			func(id string) map[string]any { return map[string]any{"c": id} }},
	}
	byID := func(name, query, key string, extra map[string]any) op {
		return op{name, query, func(id string) map[string]any {
			v := map[string]any{key: id}
			for k, x := range extra {
				v[k] = x
			}
			return v
		}}
	}
	idOps := []struct {
		op
		real string
	}{
		{byID("turn", `query($id: ID!) { turn(id: $id) { id } }`, "id", nil), turnID},
		{byID("resumeTurn", `mutation($id: ID!) { resumeTurn(input: {turnId: $id}) { id } }`, "id", nil), turnID},
		{byID("cancelTurn", `mutation($id: ID!, $c: ID!) { cancelTurn(input: {commandId: $c, turnId: $id}) { id } }`, "id",
			map[string]any{"c": uuid.NewString()}), turnID},
		{byID("steerTurn", `mutation($id: ID!, $c: ID!) { steerTurn(input: {commandId: $c, turnId: $id, text: "hi"}) { state } }`, "id",
			map[string]any{"c": uuid.NewString()}), turnID},
		{byID("decideApproval", `mutation($id: ID!) { decideApproval(input: {approvalId: $id, decision: APPROVE}) { id } }`, "id", nil), approvalID.String()},
		{byID("artifact", `query($id: ID!) { artifact(id: $id) { id } }`, "id", nil), art.ID.String()},
	}
	m := h.Client(t, mallory)
	answer := func(o op, id string) string {
		t.Helper()
		res, err := m.Raw(ctx, gqlclient.Request{Query: o.query, Variables: o.vars(id)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) == 0 {
			return "no error: " + string(res.Data)
		}
		e := res.Errors[0]
		code, _ := e.Extensions["code"].(string)
		return code + ": " + strings.ReplaceAll(e.Message, id, "<id>")
	}
	before := counts(t, h)
	for _, r := range rooms {
		for _, o := range roomOps {
			if real, fake := answer(o, r.real), answer(o, r.fake); real != fake || !strings.HasPrefix(real, "NOT_FOUND") {
				t.Errorf("%s(%q): %q; for a made-up room: %q", o.name, r.real, real, fake)
			}
		}
	}
	for _, o := range idOps {
		if real, fake := answer(o.op, o.real), answer(o.op, uuid.NewString()); real != fake || !strings.HasPrefix(real, "NOT_FOUND") {
			t.Errorf("%s(%s): %q; for a made-up id: %q", o.name, o.real, real, fake)
		}
	}
	if after := counts(t, h); after != before {
		t.Fatalf("database changed: before %+v, after %+v", before, after)
	}
}

// TestRemovedMemberTokensEnd: a removed member's tokens stream of another
// member's turn ends with the removal: no delta appended after the
// removal committed reaches them, while the author's own stream goes on
// to the end.
func TestRemovedMemberTokensEnd(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 20 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"]
	turnID := servertest.SubmitAs(t, ctx, a, team.ID, strings.Repeat("Tell me about rooms and who may read them. ", 4), "tokens-removed")
	tokens := gqlclient.Request{Query: `subscription($t: ID!) { tokens(turnId: $t) { seq text } }`, Variables: map[string]any{"t": turnID}}
	bobs, err := b.SSE(ctx, tokens)
	if err != nil {
		t.Fatal(err)
	}
	first, ok := <-bobs
	if !ok || first.Err() != nil {
		t.Fatalf("bob's first token: %+v", first)
	}
	if err := a.Do(ctx, `mutation($c: ID!) { removeRoomMember(input: {conversationId: $c, email: "bob@example.com"}) { id } }`,
		map[string]any{"c": team.ID}, nil); err != nil {
		t.Fatal(err)
	}
	var left int64
	if err := h.DB.QueryRowContext(ctx, `SELECT max(seq) FROM journal_entries WHERE conversation_id = $1 AND kind = 'member_left'`, team.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	for r := range bobs {
		var d struct {
			Tokens struct{ Seq int64 } `json:"tokens"`
		}
		if r.Err() == nil && json.Unmarshal(r.Data, &d) == nil && d.Tokens.Seq > left {
			t.Fatalf("bob received a delta at %d, after his removal at %d", d.Tokens.Seq, left)
		}
	}
	alices, err := a.SSE(ctx, tokens)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range alices {
		if r.Err() != nil {
			t.Fatalf("alice's stream: %v", r.Err())
		}
		n++
	}
	if n == 0 {
		t.Fatal("alice's stream of her own turn carried nothing")
	}
}

// TestChangesHoldOnEveryReplicaAtOnce: replicas keep no membership or
// permission of their own. A removal made through one replica holds on
// the other at the very next read, and so does a permission taken away
// and given back in the database; no replica answers from what it saw
// before.
func TestChangesHoldOnEveryReplicaAtOnce(t *testing.T) {
	t.Parallel()
	first := servertest.New(t, func(c *server.Config) { c.NoRunner = true; c.Replica = "first" })
	second := servertest.Start(t, func() server.Config {
		c := first.Config
		c.Addr, c.Replica, c.Demo = "127.0.0.1:0", "second", false
		return c
	}())
	ctx := context.Background()
	team := servertest.Rooms(t, first.Client(t, alice))["Team room"]
	bobThere := second.Client(t, bob)
	read := func() error {
		return bobThere.Do(ctx, `query($c: ID!) { journal(conversationId: $c) { head } }`, map[string]any{"c": team.ID}, nil)
	}
	docs := func() int {
		t.Helper()
		var out struct {
			Documents []struct{ ID string } `json:"documents"`
		}
		if err := bobThere.Do(ctx, `{ documents { id } }`, nil, &out); err != nil {
			t.Fatal(err)
		}
		return len(out.Documents)
	}
	// The second replica has served bob both reads before the changes.
	if err := read(); err != nil {
		t.Fatal(err)
	}
	had := docs()
	if had == 0 {
		t.Fatal("bob lists no documents")
	}
	if err := first.Client(t, alice).Do(ctx, `mutation($c: ID!) { removeRoomMember(input: {conversationId: $c, email: "bob@example.com"}) { id } }`,
		map[string]any{"c": team.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if err := read(); gqlclient.CodeOf(err) != "NOT_FOUND" {
		t.Fatalf("the other replica's next read after the removal: %v, want NOT_FOUND", err)
	}
	if _, err := first.DB.ExecContext(ctx, `DELETE FROM member_permissions WHERE permission = 'documents.read'
  AND member_id = (SELECT id FROM members WHERE email = $1)`, bob); err != nil {
		t.Fatal(err)
	}
	if n := docs(); n != 0 {
		t.Fatalf("the other replica still lists %d documents after the permission went", n)
	}
	if _, err := first.DB.ExecContext(ctx, `INSERT INTO member_permissions (id, member_id, permission)
SELECT gen_random_uuid(), id, 'documents.read' FROM members WHERE email = $1`, bob); err != nil {
		t.Fatal(err)
	}
	if n := docs(); n != had {
		t.Fatalf("the other replica lists %d documents after the permission came back, want %d", n, had)
	}
}
