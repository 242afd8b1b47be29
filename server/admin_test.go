package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// adminState is what the admin surface can change, counted.
func adminState(t *testing.T, h *servertest.Harness) string {
	t.Helper()
	var s string
	err := h.DB.QueryRow(`SELECT concat_ws(' ',
  (SELECT count(*) FROM documents), (SELECT string_agg(digest || title, ',' ORDER BY id) FROM documents),
  (SELECT count(*) FROM document_acls), (SELECT string_agg(principal, ',' ORDER BY document_id, principal) FROM document_acls),
  (SELECT count(*) FROM passages), (SELECT string_agg(permission, ',' ORDER BY member_id, permission) FROM member_permissions),
  (SELECT count(*) FROM member_groups), (SELECT count(*) FROM agents), (SELECT count(*) FROM agent_versions),
  (SELECT string_agg(specialists::text, ',' ORDER BY id) FROM member_agent_configs))`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

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
	before := adminState(t, h)
	for _, op := range ops {
		err := b.Do(ctx, op.query, nil, nil)
		if code := gqlclient.CodeOf(err); code != "FORBIDDEN" || !strings.Contains(err.Error(), op.perm) {
			t.Fatalf("bob: %s: %v (%s), want FORBIDDEN naming %s", op.query, err, code, op.perm)
		}
	}
	if after := adminState(t, h); after != before {
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
	mid := adminState(t, h)
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
	if after := adminState(t, h); after != mid {
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
	team := rooms(t, a)["Team room"].ID
	launch := citationDocuments(t, ctx, a)["Launch plan"]
	turn := submitAs(t, ctx, a, team, "When is the launch?", "before-replace")
	done := awaitTurnEnd(t, ctx, a, turn)
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
	again := awaitTurnEnd(t, ctx, a, turn)
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
	notes := rooms(t, a)["Alice's notes"].ID
	launch := citationDocuments(t, ctx, a)["Launch plan"].ID
	turn := submitAs(t, ctx, a, notes, "search twice", "twice")
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
	awaitTurnEnd(t, ctx, a, turn)
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

// TestAdminLoadsAFolder: `turngate admin docs add` loads a thousand
// documents from a folder, and a turn retrieves and cites one of them.
func TestAdminLoadsAFolder(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	w := newProcessWorld(t, bin, "turngate-admin-")
	// A thousand admin mutations from one operator: faster than a
	// person, past the command budget (the CLI's pacing is tested apart).
	r := w.start(t, "r1", append([]string{"TURNGATE_MODEL_PACE=0s"}, unlimitedCommandsEnv...)...)
	dir := t.TempDir()
	for i := range 1000 {
		body := fmt.Sprintf("# Note %04d\n\nThe codeword of note %d is amber-%d.\n\nIt was filed in batch %d.\n", i, i, i, i%7)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("note-%04d.md", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "admin", "--url", r.base, "--as", alice, "--data", w.dataDir, "docs", "add", "--reader", alice, "--reader", "group:eng", dir)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("admin docs add: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "\tNote "); n != 1000 {
		t.Fatalf("the CLI reported %d documents added, want 1000", n)
	}
	var docs, passages int
	if err := w.db.QueryRow(`SELECT (SELECT count(*) FROM documents WHERE title LIKE 'Note %'), (SELECT count(*) FROM passages p JOIN documents d ON d.id = p.document_id WHERE d.title LIKE 'Note %')`).Scan(&docs, &passages); err != nil {
		t.Fatal(err)
	}
	if docs != 1000 || passages != 3000 {
		t.Fatalf("%d documents with %d passages, want 1000 with 3000", docs, passages)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := w.client(t, r.base, alice)
	notes := rooms(t, c)["Alice's notes"].ID
	turn := submitAs(t, ctx, c, notes, "What is the codeword of note 417?", "codeword")
	done := awaitTurnEnd(t, ctx, c, turn)
	found := false
	for _, cite := range done.Citations {
		found = found || (cite.Source == "Note 0417" && strings.Contains(cite.Passage, "amber-417"))
	}
	if done.State != "COMPLETED" || !found {
		t.Fatalf("turn %s cites %+v, want Note 0417's codeword", done.State, done.Citations)
	}
	// The CLI lists them too.
	list := exec.Command(bin, "admin", "--url", r.base, "--as", alice, "--data", w.dataDir, "docs", "list")
	list.Env = cleanEnv()
	listed, err := list.Output()
	if err != nil || strings.Count(string(listed), "Note ") != 1000 {
		t.Fatalf("docs list: %v, %d notes", err, strings.Count(string(listed), "Note "))
	}
}

// TestAdminDocsAddChecksFirst: `turngate admin docs add` reads and checks
// every file before it adds any. A folder holding a symbolic link out of
// it, a file that is not UTF-8, one with a NUL or one whose title has
// nothing visible is refused as a whole, naming each bad file, and adds
// nothing; dot-files and dot-folders are left out; a symbolic link inside
// the folder is read. Run again, it adds nothing twice: a file whose
// title and content digest a document already has is reported unchanged.
func TestAdminDocsAddChecksFirst(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	h := servertest.New(t, nil)
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	docsAdd := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"admin", "--url", h.Base, "--as", alice, "--data", h.Config.DataDir, "docs", "add", "--reader", alice}, args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	outside := t.TempDir()
	write(filepath.Join(outside, "passwd.txt"), "root:x:0:0:root:/root:/bin/bash\n")
	dir := t.TempDir()
	write(filepath.Join(dir, "handbook.md"), "# Handbook\n\nThe office opens at nine.\n")
	write(filepath.Join(dir, "team", "onboarding.md"), "# Onboarding\n\nAsk for a badge on day one.\n")
	write(filepath.Join(dir, ".env.md"), "# Secrets\n\nAPI_KEY=hunter2\n")
	write(filepath.Join(dir, ".git", "notes.md"), "# Git notes\n\nnot a document\n")
	if err := os.Symlink(filepath.Join(dir, "team", "onboarding.md"), filepath.Join(dir, "welcome.md")); err != nil {
		t.Fatal(err)
	}

	before := adminState(t, h)
	bad := []struct{ name, file, body, says string }{
		{"a link out of the folder", "passwd.md", "", "outside"},
		{"invalid UTF-8", "latin1.md", "# Caf\xe9\n\nCr\xe8me br\xfbl\xe9e.\n", "UTF-8"},
		{"a NUL", "nul.txt", "# Nul\n\nbefore\x00after\n", "NUL"},
		{"an invisible title", "blank.md", "# \u200b\u2060\u200d\n\nA body.\n", "visible"},
	}
	for _, tt := range bad {
		path := filepath.Join(dir, tt.file)
		if tt.body == "" {
			if err := os.Symlink(filepath.Join(outside, "passwd.txt"), path); err != nil {
				t.Fatal(err)
			}
		} else {
			write(path, tt.body)
		}
	}
	out, err := docsAdd(dir)
	if err == nil {
		t.Fatalf("docs add of a folder with bad files succeeded:\n%s", out)
	}
	for _, tt := range bad {
		if !strings.Contains(out, tt.file) || !strings.Contains(out, tt.says) {
			t.Errorf("%s: the refusal does not name %s and say %q:\n%s", tt.name, tt.file, tt.says, out)
		}
	}
	if strings.Contains(out, "root:x") {
		t.Errorf("the refusal shows the linked file's content:\n%s", out)
	}
	if after := adminState(t, h); after != before {
		t.Fatalf("a refused import added documents:\n%s\n%s", before, after)
	}
	// Each file alone is refused too (but for the link: a file named on
	// the command line is read as named), and --title is checked like a
	// heading.
	for _, tt := range bad {
		if tt.body != "" {
			if out, err := docsAdd(filepath.Join(dir, tt.file)); err == nil {
				t.Errorf("%s alone: added\n%s", tt.name, out)
			}
		}
		os.Remove(filepath.Join(dir, tt.file))
	}
	if out, err := docsAdd("--title", "\u3164\u200b", filepath.Join(dir, "handbook.md")); err == nil || !strings.Contains(out, "visible") {
		t.Errorf("an invisible --title: %v\n%s", err, out)
	}
	if after := adminState(t, h); after != before {
		t.Fatalf("a refused file added documents:\n%s\n%s", before, after)
	}

	titles := func() map[string]int {
		t.Helper()
		rows, err := h.DB.Query(`SELECT title FROM documents`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := map[string]int{}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			n[s]++
		}
		return n
	}
	out, err = docsAdd(dir)
	if err != nil {
		t.Fatalf("docs add of the clean folder: %v\n%s", err, out)
	}
	got := titles()
	if got["Handbook"] != 1 || got["Onboarding"] != 1 || got["Secrets"] != 0 || got["Git notes"] != 0 {
		t.Fatalf("documents by title %v: want Handbook and Onboarding once each, no dot-file", got)
	}
	added := adminState(t, h)
	again, err := docsAdd(dir)
	if err != nil {
		t.Fatalf("docs add again: %v\n%s", err, again)
	}
	if after := adminState(t, h); after != added {
		t.Fatalf("a second run changed the documents:\n%s\n%s", added, after)
	}
	if strings.Count(again, "unchanged") != 3 {
		t.Fatalf("the second run reported\n%s\nwant the three files unchanged", again)
	}
	// New content under the same title is a new document (docs replace
	// updates one in place).
	write(filepath.Join(dir, "handbook.md"), "# Handbook\n\nThe office opens at ten.\n")
	if out, err := docsAdd(dir); err != nil {
		t.Fatalf("docs add of changed content: %v\n%s", err, out)
	}
	if got := titles(); got["Handbook"] != 2 || got["Onboarding"] != 1 {
		t.Fatalf("documents by title after a change %v: want a second Handbook only", got)
	}
}

// TestAdminCLIWaitsOutTheCommandBudget: every admin mutation spends the
// operator's command budget. The CLI waits out a RATE_LIMITED answer (the
// server ran nothing) and sends the mutation again, so a folder larger
// than the bucket loads whole, each document once.
func TestAdminCLIWaitsOutTheCommandBudget(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	w := newProcessWorld(t, bin, "turngate-admin-budget-")
	r := w.start(t, "r1", "TURNGATE_COMMAND_BURST=2", "TURNGATE_COMMAND_RATE=20")
	dir := t.TempDir()
	const n = 12
	for i := range n {
		body := fmt.Sprintf("# Budget note %02d\n\nThe codeword of budget note %d is teal-%d.\n", i, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("budget-%02d.md", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "admin", "--url", r.base, "--as", alice, "--data", w.dataDir, "docs", "add", "--reader", alice, dir)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("admin docs add past the budget: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "\tBudget note "); got != n {
		t.Fatalf("the CLI reported %d documents added, want %d:\n%s", got, n, out)
	}
	var docs, titles int
	if err := w.db.QueryRow(`SELECT count(*), count(DISTINCT title) FROM documents WHERE title LIKE 'Budget note %'`).Scan(&docs, &titles); err != nil {
		t.Fatal(err)
	}
	if docs != n || titles != n {
		t.Fatalf("%d documents under %d titles, want %d, each once", docs, titles, n)
	}
}
