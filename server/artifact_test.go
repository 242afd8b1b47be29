package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
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

const artifactQuery = `query($id: ID!) { artifact(id: $id) { id name mediaType size sha256 downloadUrl text } }`

type artifactView struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	MediaType   string  `json:"mediaType"`
	Size        int64   `json:"size"`
	SHA256      string  `json:"sha256"`
	DownloadURL string  `json:"downloadUrl"`
	Text        *string `json:"text"`
}

// memberID is the id of the member a client's envelope names.
func memberID(t *testing.T, c *gqlclient.Client) uuid.UUID {
	t.Helper()
	var out struct {
		Me struct{ ID string } `json:"me"`
	}
	if err := c.Do(context.Background(), `{ me { id } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(out.Me.ID)
}

// download GETs path as email ("" for no envelope).
func download(t *testing.T, h *servertest.Harness, email, path string, hdr http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if email != "" {
		tok, err := server.MintDev(h.Signer, email, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(h.Config.IdentityHeader, tok)
	}
	res, err := servertest.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestArtifactReadAccess: the owner reads an artifact through GraphQL and
// HTTP; someone who neither owns it nor shares a room referencing it gets
// the same NOT_FOUND / 404 as for an artifact that does not exist; a room
// reference opens it to the room's current members only.
func TestArtifactReadAccess(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	a, b, m := h.Client(t, alice), h.Client(t, bob), h.Client(t, mallory)
	aliceID := memberID(t, a)
	memberID(t, m) // mallory exists, in no room
	content := []byte("# Findings\n\nThe launch moves to Friday.\n")
	ref, err := resource.CreateArtifact(ctx, h.DB, aliceID, uuid.Nil, "findings.md", "", content)
	if err != nil {
		t.Fatal(err)
	}
	path := "/artifacts/" + ref.ID.String()

	var out struct {
		Artifact *artifactView `json:"artifact"`
	}
	if err := a.Do(ctx, artifactQuery, map[string]any{"id": ref.ID.String()}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.Artifact
	if got == nil || got.ID != ref.ID.String() || got.Name != "findings.md" || got.MediaType != "text/markdown" ||
		got.Size != int64(len(content)) || got.SHA256 != sha256Hex(content) || got.DownloadURL != path ||
		got.Text == nil || *got.Text != string(content) {
		t.Fatalf("alice's artifact = %+v", got)
	}

	res, body := download(t, h, alice, path, nil)
	if res.StatusCode != http.StatusOK || string(body) != string(content) {
		t.Fatalf("alice downloads: %d %q", res.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/markdown",
		"Content-Disposition":    "attachment; filename=findings.md",
		"X-Content-Type-Options": "nosniff",
		"ETag":                   `"` + sha256Hex(content) + `"`,
	} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if res, body := download(t, h, alice, path, http.Header{"If-None-Match": {`"` + ref.SHA256 + `"`}}); res.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("revalidation: %d %q, want 304", res.StatusCode, body)
	}
	if res, body := download(t, h, "", path, nil); res.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "Findings") {
		t.Errorf("without an envelope: %d %q, want 401", res.StatusCode, body)
	}

	notVisible := func(who string, c *gqlclient.Client) {
		t.Helper()
		resp, err := c.Raw(ctx, gqlclient.Request{Query: artifactQuery, Variables: map[string]any{"id": ref.ID.String()}})
		if err != nil {
			t.Fatal(err)
		}
		if code := gqlclient.CodeOf(resp.Err()); code != "NOT_FOUND" || strings.Contains(string(resp.Data), "findings") {
			t.Errorf("%s: artifact = %s, %v; want NOT_FOUND and no data", who, resp.Data, resp.Err())
		}
		if res, body := download(t, h, who, path, nil); res.StatusCode != http.StatusNotFound || strings.Contains(string(body), "Findings") {
			t.Errorf("%s downloads: %d %q, want 404", who, res.StatusCode, body)
		}
	}
	notVisible(bob, b)
	notVisible(mallory, m)
	for _, p := range []string{"/artifacts/" + uuid.NewString(), "/artifacts/not-a-uuid"} {
		if res, _ := download(t, h, alice, p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, res.StatusCode)
		}
	}
	if err := a.Do(ctx, artifactQuery, map[string]any{"id": uuid.NewString()}, nil); gqlclient.CodeOf(err) != "NOT_FOUND" {
		t.Errorf("a nonexistent artifact: %v, want NOT_FOUND", err)
	}

	// A reference in the team room opens it to bob, a current member...
	team := servertest.Rooms(t, a)["Team room"]
	if _, err := h.DB.Exec(`INSERT INTO room_resources (id, conversation_id, artifact_id, digest) VALUES ($1, $2, $3, $4)`,
		uuid.New(), team.ID, ref.ID, ref.SHA256); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(ctx, artifactQuery, map[string]any{"id": ref.ID.String()}, &out); err != nil || out.Artifact.Text == nil || *out.Artifact.Text != string(content) {
		t.Errorf("bob via the room: %+v, %v", out.Artifact, err)
	}
	if res, body := download(t, h, bob, path, nil); res.StatusCode != http.StatusOK || string(body) != string(content) {
		t.Errorf("bob downloads via the room: %d %q", res.StatusCode, body)
	}
	notVisible(mallory, m)
	// ...and only while he is one.
	if err := a.Do(ctx, `mutation($c: ID!, $e: String!) { removeRoomMember(input: {conversationId: $c, email: $e}) { id } }`,
		map[string]any{"c": team.ID, "e": bob}, nil); err != nil {
		t.Fatal(err)
	}
	notVisible(bob, b)
}

// TestArtifactTextOnlyForSmallText: text is given for small text and JSON
// artifacts only; everything can still be downloaded.
func TestArtifactTextOnlyForSmallText(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	a := h.Client(t, alice)
	aliceID := memberID(t, a)
	for _, tc := range []struct {
		name, mediaType string
		content         []byte
		text            bool
	}{
		{"data.json", "", []byte(`{"a":1}`), true},
		{"plain.txt", "text/plain; charset=utf-8", []byte("hello"), true},
		{"big.txt", "", []byte(strings.Repeat("x", 64<<10+1)), false},
		{"blob.bin", "application/octet-stream", []byte{0, 1, 2, 0xff}, false},
		{"latin1.txt", "", []byte{0xe9, 't', 0xe9}, false},
	} {
		ref, err := resource.CreateArtifact(ctx, h.DB, aliceID, uuid.Nil, tc.name, tc.mediaType, tc.content)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Artifact *artifactView `json:"artifact"`
		}
		if err := a.Do(ctx, artifactQuery, map[string]any{"id": ref.ID.String()}, &out); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (out.Artifact.Text != nil) != tc.text || (tc.text && *out.Artifact.Text != string(tc.content)) {
			t.Errorf("%s: text = %v, want text %v", tc.name, out.Artifact.Text, tc.text)
		}
		res, body := download(t, h, alice, out.Artifact.DownloadURL, nil)
		if res.StatusCode != http.StatusOK || string(body) != string(tc.content) || res.Header.Get("Content-Type") != ref.MediaType {
			t.Errorf("%s downloads: %d, %d bytes, %s", tc.name, res.StatusCode, len(body), res.Header.Get("Content-Type"))
		}
	}
}

// TestArtifactDigestMismatchRefused: content that no longer matches its
// sha256 is never served, over HTTP or as text.
func TestArtifactDigestMismatchRefused(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	a := h.Client(t, alice)
	ref, err := resource.CreateArtifact(ctx, h.DB, memberID(t, a), uuid.Nil, "ledger.csv", "", []byte("total,100\n"))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := h.DB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE artifacts DISABLE TRIGGER artifacts_immutable`,
		`UPDATE artifacts SET content = convert_to('total,999' || chr(10), 'UTF8') WHERE id = '` + ref.ID.String() + `'`,
		`ALTER TABLE artifacts ENABLE TRIGGER artifacts_immutable`,
	} {
		if _, err := tx.Exec(q); err != nil {
			tx.Rollback()
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	res, body := download(t, h, alice, "/artifacts/"+ref.ID.String(), nil)
	if res.StatusCode != http.StatusConflict || strings.Contains(string(body), "total,999") || !strings.Contains(string(body), "digest") {
		t.Errorf("download of tampered content: %d %q, want 409 naming the digest check", res.StatusCode, body)
	}
	if res.Header.Get("ETag") != "" || strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("a refused download carries the artifact's headers: %v", res.Header)
	}
	resp, err := a.Raw(ctx, gqlclient.Request{Query: artifactQuery, Variables: map[string]any{"id": ref.ID.String()}})
	if err != nil {
		t.Fatal(err)
	}
	if code := gqlclient.CodeOf(resp.Err()); code != "CONFLICT" || strings.Contains(string(resp.Data), "total,999") {
		t.Errorf("text of tampered content: %s, %v; want CONFLICT and no text", resp.Data, resp.Err())
	}
}

// TestDocumentsQuery: documents lists what the caller's ACL holds now,
// optionally filtered by full-text search, and nothing else.
func TestDocumentsQuery(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	digests := map[string]string{}
	for _, d := range demo.Documents {
		digests[d.Title] = resource.Digest(d.Body)
	}
	list := func(c *gqlclient.Client, vars map[string]any) []string {
		t.Helper()
		var out struct {
			Documents []struct{ ID, Title, Digest string } `json:"documents"`
		}
		if err := c.Do(ctx, `query($first: Int, $q: String) { documents(first: $first, query: $q) { id title digest } }`, vars, &out); err != nil {
			t.Fatal(err)
		}
		var titles []string
		for _, d := range out.Documents {
			if uuid.Validate(d.ID) != nil || d.Digest != digests[d.Title] {
				t.Errorf("document %+v", d)
			}
			titles = append(titles, d.Title)
		}
		return titles
	}
	a, b, m := h.Client(t, alice), h.Client(t, bob), h.Client(t, mallory)
	for _, tc := range []struct {
		who  string
		c    *gqlclient.Client
		vars map[string]any
		want string
	}{
		{"alice", a, nil, "Compensation bands 2027|Launch plan|Security policy"},
		{"alice, first 1", a, map[string]any{"first": 1}, "Compensation bands 2027"},
		{"bob", b, nil, "Launch plan|Security policy"},
		{"mallory", m, nil, ""},
		{"alice, bands", a, map[string]any{"q": "engineering bands"}, "Compensation bands 2027"},
		{"bob, bands", b, map[string]any{"q": "engineering bands"}, ""},
		{"bob, keys", b, map[string]any{"q": "signing keys"}, "Security policy"},
		{"bob, blank query", b, map[string]any{"q": "  "}, "Launch plan|Security policy"},
		{"mallory, launch", m, map[string]any{"q": "launch"}, ""},
	} {
		if got := strings.Join(list(tc.c, tc.vars), "|"); got != tc.want {
			t.Errorf("%s: documents = %q, want %q", tc.who, got, tc.want)
		}
	}
	for _, vars := range []map[string]any{{"first": 0}, {"first": 101}, {"q": strings.Repeat("x", 501)}} {
		if err := a.Do(ctx, `query($first: Int, $q: String) { documents(first: $first, query: $q) { id } }`, vars, nil); gqlclient.CodeOf(err) != "BAD_USER_INPUT" {
			t.Errorf("%v: err = %v, want BAD_USER_INPUT", vars, err)
		}
	}
}

// TestDocumentReadsNeedThePermission: the documents.read permission gates
// every read of documents, as it gates retrieval: without it, a member
// whose email a document's ACL names lists nothing and cannot select it
// for a turn (NOT_FOUND, writing nothing); with it again, both work.
func TestDocumentReadsNeedThePermission(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	b := h.Client(t, bob)
	room := servertest.Rooms(t, b)["Bob's notes"]
	list := func() []string {
		t.Helper()
		var out struct {
			Documents []struct{ ID string } `json:"documents"`
		}
		if err := b.Do(ctx, `{ documents { id } }`, nil, &out); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range out.Documents {
			ids = append(ids, d.ID)
		}
		return ids
	}
	readable := list()
	if len(readable) == 0 {
		t.Fatal("bob lists no documents with the permission")
	}
	selectDoc := func(key string) error {
		return b.Do(ctx, `mutation($c: ID!, $d: [ID!]) { submitMessage(input: {conversationId: $c, text: "from my documents", idempotencyKey: "`+key+`", documentIds: $d}) { id } }`,
			map[string]any{"c": room.ID, "d": readable[:1]}, nil)
	}
	if _, err := h.DB.ExecContext(ctx, `DELETE FROM member_permissions WHERE permission = 'documents.read'
  AND member_id = (SELECT id FROM members WHERE email = $1)`, bob); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("without documents.read bob lists %v", got)
	}
	before := counts(t, h)
	if err := selectDoc("perm-1"); gqlclient.CodeOf(err) != "NOT_FOUND" {
		t.Errorf("selecting a document without documents.read: %v, want NOT_FOUND", err)
	}
	if after := counts(t, h); after != before {
		t.Errorf("the refused submission wrote: before %+v, after %+v", before, after)
	}
	if _, err := h.DB.ExecContext(ctx, `INSERT INTO member_permissions (id, member_id, permission)
SELECT gen_random_uuid(), id, 'documents.read' FROM members WHERE email = $1`, bob); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != len(readable) {
		t.Errorf("with documents.read again bob lists %v, want %v", got, readable)
	}
	if err := selectDoc("perm-2"); err != nil {
		t.Errorf("selecting a document with documents.read: %v", err)
	}
}
