package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestAdminNeedsItsPermission: every admin query and mutation is
// FORBIDDEN to a member without its permission, and changes nothing;
// alice (the demo's operator) may; a permission revoked is gone at the
// next call.
func TestAdminNeedsItsPermission(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, "bob@example.com")
	docs := citationDocuments(t, ctx, a)
	launch := docs["Launch plan"].ID
	version := `{controller: "react", modelRoute: "builtin", tools: ["retrieval"], budgets: {max_steps: 3}}`
	ops := []struct{ perm, query string }{
		{"admin:documents", `{ adminDocuments { nodes { id } } }`},
		{"admin:documents", `mutation { addDocument(input: {title: "T", body: "B", readers: ["bob@example.com"]}) { id } }`},
		{"admin:documents", `mutation { replaceDocument(input: {documentId: "` + launch + `", body: "new"}) { id } }`},
		{"admin:documents", `mutation { setDocumentReaders(input: {documentId: "` + launch + `", readers: []}) { id } }`},
		{"admin:documents", `mutation { deleteDocument(input: {documentId: "` + launch + `"}) }`},
		{"admin:members", `{ adminMembers { nodes { id } } }`},
		{"admin:members", `mutation { grantPermission(input: {email: "bob@example.com", permission: "admin:documents"}) { id } }`},
		{"admin:members", `mutation { revokePermission(input: {email: "alice@example.com", permission: "documents.read"}) { id } }`},
		{"admin:members", `mutation { addGroupMember(input: {email: "bob@example.com", group: "eng"}) { id } }`},
		{"admin:members", `mutation { removeGroupMember(input: {email: "alice@example.com", group: "eng"}) { id } }`},
		{"admin:agents", `{ adminAgents { slug } }`},
		{"admin:agents", `mutation { createAgent(input: {slug: "helper", name: "Helper", version: ` + version + `}) { id } }`},
		{"admin:agents", `mutation { addAgentVersion(input: {slug: "assistant", version: ` + version + `}) { id } }`},
		{"admin:agents", `mutation { setMemberRoster(input: {email: "bob@example.com", agent: "assistant", specialists: ["researcher"]}) { id } }`},
	}
	before := servertest.AdminState(t, h)
	for _, op := range ops {
		err := b.Do(ctx, op.query, nil, nil)
		if code := gqlclient.CodeOf(err); code != "FORBIDDEN" || !strings.Contains(err.Error(), op.perm) {
			t.Fatalf("bob: %s: %v (%s), want FORBIDDEN naming %s", op.query, err, code, op.perm)
		}
	}
	if after := servertest.AdminState(t, h); after != before {
		t.Fatalf("refused operations changed something:\n%s\n%s", before, after)
	}

	// Alice may; bob may once granted, and not once revoked again.
	for _, op := range ops[:4] {
		if err := a.Do(ctx, op.query, nil, nil); err != nil {
			t.Fatalf("alice: %s: %v", op.query, err)
		}
	}
	grant := `mutation($p: String!) { grantPermission(input: {email: "bob@example.com", permission: $p}) { permissions } }`
	revoke := `mutation($p: String!) { revokePermission(input: {email: "bob@example.com", permission: $p}) { permissions } }`
	if err := a.Do(ctx, grant, map[string]any{"p": "admin:agents"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(ctx, `{ adminAgents { slug } }`, nil, nil); err != nil {
		t.Fatalf("bob after the grant: %v", err)
	}
	if err := a.Do(ctx, revoke, map[string]any{"p": "admin:agents"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(ctx, `{ adminAgents { slug } }`, nil, nil); gqlclient.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("bob after the revoke: %v", err)
	}
	// Bad input is BAD_USER_INPUT and changes nothing.
	mid := servertest.AdminState(t, h)
	for _, q := range []string{
		`mutation { addDocument(input: {title: "", body: "B", readers: []}) { id } }`,
		`mutation { addDocument(input: {title: "\u200b\u2060 \u3164", body: "B", readers: []}) { id } }`,
		`mutation { replaceDocument(input: {documentId: "` + launch + `", title: "\u200d\ufeff", body: "new"}) { id } }`,
		`mutation { addDocument(input: {title: "T", body: "B", readers: ["not an email"]}) { id } }`,
		`mutation { addGroupMember(input: {email: "bob@example.com", group: "Bad Name"}) { id } }`,
		`mutation { createAgent(input: {slug: "x", name: "X", version: {controller: "plugin", modelRoute: "builtin"}}) { id } }`,
		`mutation { createAgent(input: {slug: "x", name: "X", version: {controller: "react", modelRoute: "builtin", tools: ["rm_rf"]}}) { id } }`,
		`mutation { setDocumentReaders(input: {documentId: "not-a-uuid", readers: []}) { id } }`,
	} {
		if err := a.Do(ctx, q, nil, nil); gqlclient.CodeOf(err) != "BAD_USER_INPUT" {
			t.Fatalf("%s: %v, want BAD_USER_INPUT", q, err)
		}
	}
	if after := servertest.AdminState(t, h); after != mid {
		t.Fatalf("refused input changed something")
	}
}

// TestGroupsAndReplacedContent: a document readable by a group is read by
// its members only; replaced content has a new digest, and an answer
// that cited the old one keeps the digest it cited.
func TestGroupsAndReplacedContent(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.ModelPace = 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, "bob@example.com")
	var added struct {
		AddDocument struct{ ID, Digest string }
	}
	// alice reads it too: who changes eng's members must read what eng reads.
	if err := a.Do(ctx, `mutation { addDocument(input: {title: "Quokka plan", body: "The quokka migration starts in March.", readers: ["group:eng", "alice@example.com"]}) { id digest } }`, nil, &added); err != nil {
		t.Fatal(err)
	}
	titles := func(c *gqlclient.Client) string {
		var out struct {
			DocumentsConnection struct {
				Edges []struct{ Node struct{ Title string } }
			}
		}
		if err := c.Do(ctx, `{ documentsConnection(first: 100) { edges { node { title } } } }`, nil, &out); err != nil {
			t.Fatal(err)
		}
		var ts []string
		for _, e := range out.DocumentsConnection.Edges {
			ts = append(ts, e.Node.Title)
		}
		return strings.Join(ts, ",")
	}
	if strings.Contains(titles(b), "Quokka") {
		t.Fatal("bob reads a group document before he is in the group")
	}
	if err := a.Do(ctx, `mutation { addGroupMember(input: {email: "bob@example.com", group: "eng"}) { groups } }`, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(titles(b), "Quokka") {
		t.Fatal("bob, now in eng, cannot read the eng document")
	}
	if err := a.Do(ctx, `mutation { removeGroupMember(input: {email: "bob@example.com", group: "eng"}) { groups } }`, nil, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(titles(b), "Quokka") {
		t.Fatal("bob still reads the eng document after leaving eng")
	}

	// Cite the Launch plan, replace it, and the old answer keeps its digest.
	team := servertest.Rooms(t, a)["Team room"].ID
	launch := citationDocuments(t, ctx, a)["Launch plan"]
	turn := servertest.SubmitAs(t, ctx, a, team, "When is the launch?", "before-replace")
	done := servertest.AwaitTurnEnd(t, ctx, a, turn)
	var replaced struct {
		ReplaceDocument struct{ Digest, Title string }
	}
	if err := a.Do(ctx, `mutation($d: ID!) { replaceDocument(input: {documentId: $d, body: "The launch moves to January."}) { digest title } }`,
		map[string]any{"d": launch.ID}, &replaced); err != nil {
		t.Fatal(err)
	}
	if replaced.ReplaceDocument.Digest == launch.Digest || replaced.ReplaceDocument.Title != "Launch plan" {
		t.Fatalf("replaced %+v, old digest %s", replaced.ReplaceDocument, launch.Digest)
	}
	again := servertest.AwaitTurnEnd(t, ctx, a, turn)
	for i, c := range again.Citations {
		if c.Digest == nil || done.Citations[i].Digest == nil || *c.Digest != *done.Citations[i].Digest {
			t.Fatalf("citation %d's digest changed with the document: %v", i, c.Digest)
		}
	}
}

// stepModel is an OpenAI-compatible model that searches, waits for the
// test's go-ahead, searches again, then answers: a turn with two tool
// calls and a gap between them.
type stepModel struct {
	mu      sync.Mutex
	calls   int
	between chan struct{} // closed by the test to let the second search go
	first   chan struct{} // closed when the first search result came back
}

func (m *stepModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.ReadAll(r.Body)
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
	}
	search := func(id string) {
		send(`{"role":"assistant","tool_calls":[{"index":0,"id":"`+id+`","type":"function","function":{"name":"retrieval","arguments":"{\"query\":\"launch\"}"}}]}`, "null")
		send(`{}`, `"tool_calls"`)
	}
	switch n {
	case 1:
		search("call_1")
	case 2:
		close(m.first)
		<-m.between
		search("call_2")
	default:
		send(`{"role":"assistant","content":"Done."}`, "null")
		send(`{}`, `"stop"`)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestReaderRemovedMidTurn: a reader removed while a turn runs loses the
// document at the turn's very next tool call.
func TestReaderRemovedMidTurn(t *testing.T) {
	t.Parallel()
	model := &stepModel{between: make(chan struct{}), first: make(chan struct{})}
	llm := httptest.NewServer(model)
	defer llm.Close()
	h := servertest.New(t, func(c *server.Config) {
		c.OpenAI = gateway.OpenAIConfig{BaseURL: llm.URL, APIKey: "sk-local", Model: "m"}
		c.AgentRoute = "openai"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	notes := servertest.Rooms(t, a)["Alice's notes"].ID
	launch := citationDocuments(t, ctx, a)["Launch plan"].ID
	turn := servertest.SubmitAs(t, ctx, a, notes, "search twice", "twice")
	select {
	case <-model.first:
	case <-ctx.Done():
		t.Fatal("the first search never came back")
	}
	if err := a.Do(ctx, `mutation($d: ID!) { setDocumentReaders(input: {documentId: $d, readers: ["bob@example.com"]}) { readers } }`,
		map[string]any{"d": launch}, nil); err != nil {
		t.Fatal(err)
	}
	close(model.between)
	servertest.AwaitTurnEnd(t, ctx, a, turn)
	rows, err := h.DB.Query(`SELECT payload->>'callId', payload->'citations' FROM journal_entries WHERE turn_id = $1 AND kind = 'tool_completed' ORDER BY seq`, turn)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cited := map[string]string{}
	for rows.Next() {
		var call, cites string
		if err := rows.Scan(&call, &cites); err != nil {
			t.Fatal(err)
		}
		cited[call] = cites
	}
	if !strings.Contains(cited["call_1"], launch) || strings.Contains(cited["call_2"], launch) {
		t.Fatalf("citations by call %v: want the Launch plan (%s) found by the first search only", cited, launch)
	}
}
