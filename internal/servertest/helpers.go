package servertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/server"
)

type Room struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Kind      string `json:"kind"`
	PublicKey string `json:"publicKey"`
	Channel   string `json:"channel"`
	Head      int64  `json:"head"`
}

// Rooms lists the caller's rooms by title.
func Rooms(t *testing.T, c *gqlclient.Client) map[string]Room {
	t.Helper()
	var out struct {
		Conversations struct {
			Edges []struct{ Node Room } `json:"edges"`
		} `json:"conversations"`
	}
	if err := c.Do(context.Background(), `{ conversations { edges { node { id title kind publicKey channel head } } } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	m := map[string]Room{}
	for _, e := range out.Conversations.Edges {
		m[e.Node.Title] = e.Node
	}
	return m
}

const SubmitMutation = `mutation($c: ID!, $t: String!, $k: String!) { submitMessage(input: {conversationId: $c, text: $t, idempotencyKey: $k}) { id position state } }`

// NextJournal reads the next journal entry of a subscription, decoded as
// E (each test names the fields it selects), failing the test when the
// subscription ends, errs or ctx's deadline passes first.
func NextJournal[E any](t *testing.T, ctx context.Context, msgs <-chan gqlclient.Message) E {
	t.Helper()
	var zero E
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("subscription ended early")
		}
		if m.Type != "next" {
			t.Fatalf("subscription message %s: %s", m.Type, m.Payload)
		}
		var r struct {
			Data struct {
				Journal E `json:"journal"`
			} `json:"data"`
			Errors []gqlclient.Error `json:"errors"`
		}
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Errors) > 0 {
			t.Fatalf("subscription error: %+v", r.Errors)
		}
		return r.Data.Journal
	case <-ctx.Done():
		t.Fatal("timed out waiting for a journal entry")
	}
	return zero
}

// SubmitAs submits text to room as c and returns the turn's id.
func SubmitAs(t *testing.T, ctx context.Context, c *gqlclient.Client, room, text, key string) string {
	t.Helper()
	var out struct {
		SubmitMessage struct{ ID string } `json:"submitMessage"`
	}
	if err := c.Do(ctx, SubmitMutation, map[string]any{"c": room, "t": text, "k": key}, &out); err != nil {
		t.Fatalf("submit %s: %v", key, err)
	}
	return out.SubmitMessage.ID
}

// WaitTurnState polls the turn until it is terminal, with ctx's deadline.
func WaitTurnState(t *testing.T, ctx context.Context, db *sql.DB, id string) string {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var state string
		if err := db.QueryRowContext(ctx, `SELECT state FROM turns WHERE id = $1`, id).Scan(&state); err != nil {
			t.Fatalf("turn %s: %v", id, err)
		}
		if state != "queued" && state != "running" {
			return state
		}
		select {
		case <-ctx.Done():
			t.Fatalf("turn %s still %s at the deadline", id, state)
		case <-tick.C:
		}
	}
}

// WaitFor polls a boolean query until it is true, with ctx's deadline.
func WaitFor(t testing.TB, ctx context.Context, db *sql.DB, query string, args ...any) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var ok bool
		if err := db.QueryRowContext(ctx, query, args...).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("condition never held: %s", query)
		case <-tick.C:
		}
	}
}

type WireEntry struct {
	Seq    int64   `json:"seq"`
	Kind   string  `json:"kind"`
	TurnID *string `json:"turnId"`
	Text   *string `json:"text"`
}

const JournalSub = `subscription($c: ID!, $after: Int) { journal(conversationId: $c, after: $after) { seq kind turnId text } }`

const CitationTurnQuery = `query($id: ID!) { turn(id: $id) {
  id state answer
  citations { id: ref documentId source passage digest }
  artifacts { artifactId resourceId name mediaType size sha256 downloadUrl }
  approvals { id state }
} }`

type TurnAnswerView struct {
	ID        string         `json:"id"`
	State     string         `json:"state"`
	Answer    *string        `json:"answer"`
	Citations []CitationView `json:"citations"`
	Artifacts []struct {
		ArtifactID string `json:"artifactId"`
	} `json:"artifacts"`
	Approvals []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"approvals"`
}

// CitationTurn reads a turn as c.
func CitationTurn(ctx context.Context, c *gqlclient.Client, id string) (*TurnAnswerView, error) {
	var out struct {
		Turn *TurnAnswerView `json:"turn"`
	}
	if err := c.Do(ctx, CitationTurnQuery, map[string]any{"id": id}, &out); err != nil {
		return nil, err
	}
	return out.Turn, nil
}

// AwaitTurnEnd polls the turn through GraphQL, as c, until it has ended,
// failing the test at ctx's deadline.
func AwaitTurnEnd(t *testing.T, ctx context.Context, c *gqlclient.Client, id string) *TurnAnswerView {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := CitationTurn(ctx, c, id)
		if err != nil {
			t.Fatalf("turn %s: %v", id, err)
		}
		if got == nil {
			t.Fatalf("turn %s is not visible", id)
		}
		if got.State != "QUEUED" && got.State != "RUNNING" {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("turn %s still %s at the deadline", id, got.State)
		case <-tick.C:
		}
	}
}

// CheckCoded fails unless errs is one error with code and
// extensions.retryable as the closed set says.
func CheckCoded(t *testing.T, errs []gqlclient.Error, code string) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("no error, want %s", code)
	}
	e := errs[0]
	if e.Code() != code {
		t.Fatalf("code = %q (%s), want %s", e.Code(), e.Message, code)
	}
	retryable, ok := e.Extensions["retryable"].(bool)
	if !ok || retryable != (code == "UNAVAILABLE" || code == "RATE_LIMITED") {
		t.Fatalf("extensions.retryable = %v for %s", e.Extensions["retryable"], code)
	}
}

type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// RawWS is a graphql-transport-ws client that shows everything the server
// sends, close codes included (gqlclient keeps them to itself).
type RawWS struct {
	t *testing.T
	// WS is the socket itself, for a test that reads it frame by frame.
	WS *websocket.Conn
}

// DialRaw opens a graphql-transport-ws socket with email's envelope on the
// upgrade request (none when email is ""), without connection_init.
func DialRaw(t *testing.T, ctx context.Context, h *Harness, email string) *RawWS {
	t.Helper()
	ws, res, err := websocket.Dial(ctx, strings.Replace(h.Base, "http", "ws", 1)+"/graphql", &websocket.DialOptions{
		HTTPHeader:   IdentityHeader(t, h, email),
		Subprotocols: []string{"graphql-transport-ws"},
	})
	if err != nil {
		if res != nil {
			t.Fatalf("dial: HTTP %d: %v", res.StatusCode, err)
		}
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &RawWS{t: t, WS: ws}
}

// DialSubscribed opens a graphql-transport-ws socket to base with hdr on
// the upgrade, initialises it and subscribes r as "j".
func DialSubscribed(t *testing.T, ctx context.Context, base string, hdr http.Header, r gqlclient.Request) *RawWS {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/graphql", &websocket.DialOptions{
		HTTPHeader: hdr, Subprotocols: []string{"graphql-transport-ws"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	raw := &RawWS{t: t, WS: ws}
	raw.Init(ctx)
	raw.Subscribe(ctx, "j", r)
	return raw
}

func IdentityHeader(t *testing.T, h *Harness, email string) http.Header {
	t.Helper()
	hdr := http.Header{}
	if email != "" {
		tok, err := server.MintDev(h.Signer, email, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		hdr.Set(h.Config.IdentityHeader, tok)
	}
	return hdr
}

// init sends connection_init and waits for connection_ack.
func (c *RawWS) Init(ctx context.Context) {
	c.t.Helper()
	c.Send(ctx, gqlclient.Message{Type: "connection_init"})
	if m := c.Read(ctx); m.Type != "connection_ack" {
		c.t.Fatalf("got %s %s, want connection_ack", m.Type, m.Payload)
	}
}

func (c *RawWS) Send(ctx context.Context, m gqlclient.Message) {
	c.t.Helper()
	if err := wsjson.Write(ctx, c.WS, m); err != nil {
		c.t.Fatalf("send %s %s: %v", m.Type, m.ID, err)
	}
}

func (c *RawWS) Subscribe(ctx context.Context, id string, r gqlclient.Request) {
	c.t.Helper()
	payload, err := json.Marshal(r)
	if err != nil {
		c.t.Fatal(err)
	}
	c.Send(ctx, gqlclient.Message{ID: id, Type: "subscribe", Payload: payload})
}

// read returns the next message that is not a ping (pings are answered).
func (c *RawWS) Read(ctx context.Context) gqlclient.Message {
	c.t.Helper()
	for {
		var m gqlclient.Message
		if err := wsjson.Read(ctx, c.WS, &m); err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if m.Type == "ping" {
			c.Send(ctx, gqlclient.Message{Type: "pong"})
			continue
		}
		return m
	}
}

// expectClose reads until the server closes the socket and checks the
// close code and reason.
func (c *RawWS) ExpectClose(ctx context.Context, code websocket.StatusCode, reason string) {
	c.t.Helper()
	for {
		_, data, err := c.WS.Read(ctx)
		if err == nil {
			continue // messages sent before the close
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("socket ended with %v (last message %s), want close %d %q", err, data, code, reason)
		}
		if ce.Code != code || ce.Reason != reason {
			c.t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Reason, code, reason)
		}
		return
	}
}

// HeavyShape fills a document of a given size: request(i, size) is a
// valid request for exactly size bytes of document, distinct for each i,
// whose selected operation answers {"__typename": "Query"}.
type HeavyShape struct {
	Name    string
	Request func(i, size int) gqlclient.Request
}

var HeavyShapes = []HeavyShape{
	// Each comment is kept in the tree, attached to the next node.
	{"comment lines", func(i, size int) gqlclient.Request {
		return gqlclient.Request{Query: FillQuery(fmt.Sprintf("query Q%d { __typename\n", i), "#\n", "}", size)}
	}},
	// A list literal of 2-byte IDs as a variable's default, in an
	// operation that is validated and cached with the document but never
	// run (operationName picks the other).
	{"list values", func(i, size int) gqlclient.Request {
		return gqlclient.Request{
			Query: FillQuery(fmt.Sprintf("query Q%d { __typename } mutation M($d: [ID!] = [", i), "1 ",
				`]) { submitMessage(input: {conversationId: "c", text: "t", idempotencyKey: "k", documentIds: $d}) { id } }`, size),
			OperationName: fmt.Sprintf("Q%d", i),
		}
	}},
	// 401 fields, within MaxFields and the complexity limit, then a
	// comment: light enough to be cached, so the cache fills and evicts.
	{"aliases and a comment", func(i, size int) gqlclient.Request {
		var b strings.Builder
		fmt.Fprintf(&b, "query Q%d { __typename", i)
		for a := range 400 {
			fmt.Fprintf(&b, " a%d: __typename", a)
		}
		return gqlclient.Request{Query: FillQuery(b.String()+" } #", "x", "", size)}
	}},
}

// FillQuery is head, fill repeated while it fits, and tail, padded with
// spaces to exactly size bytes.
func FillQuery(head, fill, tail string, size int) string {
	reps := (size - len(head) - len(tail)) / len(fill)
	q := head + strings.Repeat(fill, reps) + tail
	return q + strings.Repeat(" ", size-len(q))
}

// PlatformKey writes a new platform public key for production mode and
// returns its file and a signer holding the private half.
func PlatformKey(t *testing.T, iss, aud string) (string, *authority.Signer) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := authority.MarshalPublicKeyPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "platform.pem")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, authority.NewSigner(iss, aud, priv)
}

// SoloSharedRoom has alice create a shared room and ask, alone in it,
// about the compensation bands (only she may read them); it returns the
// room and the turn, completed.
func SoloSharedRoom(t *testing.T, ctx context.Context, h *Harness, a *gqlclient.Client) (room, bandsTurn string) {
	t.Helper()
	var out struct {
		CreateConversation struct{ ID string } `json:"createConversation"`
	}
	if err := a.Do(ctx, `mutation { createConversation(input: {title: "Planning", kind: SHARED}) { id } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	room = out.CreateConversation.ID
	bandsTurn = SubmitAs(t, ctx, a, room, "What are the engineering bands for 2027?", "bands-solo")
	if state := WaitTurnState(t, ctx, h.DB, bandsTurn); state != "completed" {
		t.Fatalf("alice's solo turn ended %s", state)
	}
	return room, bandsTurn
}

// AddMember has the owner add email to room and returns how many earlier
// turns the new member reads withheld, as addRoomMember's result says.
func AddMember(t *testing.T, ctx context.Context, owner *gqlclient.Client, room, email string) int {
	t.Helper()
	var out struct {
		AddRoomMember struct {
			Members []struct {
				Member        struct{ Email string }
				WithheldTurns int
			}
		} `json:"addRoomMember"`
	}
	if err := owner.Do(ctx, `mutation($c: ID!, $e: String!) { addRoomMember(input: {conversationId: $c, email: $e}) {
  members { member { email } withheldTurns } } }`, map[string]any{"c": room, "e": email}, &out); err != nil {
		t.Fatal(err)
	}
	for _, m := range out.AddRoomMember.Members {
		if m.Member.Email == email {
			return m.WithheldTurns
		}
	}
	t.Fatalf("addRoomMember's result does not list %s", email)
	return 0
}

// UnlimitedCommandsEnv is unlimitedCommands for a server process.
var UnlimitedCommandsEnv = []string{"TURNGATE_COMMAND_RATE=1e9", "TURNGATE_COMMAND_BURST=1073741824"}

// AdminState is what the admin surface can change, counted.
func AdminState(t *testing.T, h *Harness) string {
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

// CitationView is a citation as the turn query selects it.
type CitationView struct {
	ID         string  `json:"id"`
	DocumentID *string `json:"documentId"`
	Source     string  `json:"source"`
	Passage    string  `json:"passage"`
	Digest     *string `json:"digest"`
}

// AwaitClose answers pings until the server closes the socket, and checks
// the close code.
func (c *RawWS) AwaitClose(ctx context.Context, code websocket.StatusCode) {
	c.t.Helper()
	for {
		var m gqlclient.Message
		err := wsjson.Read(ctx, c.WS, &m)
		if err == nil {
			if m.Type == "ping" {
				_ = wsjson.Write(ctx, c.WS, gqlclient.Message{Type: "pong"})
			}
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("socket ended with %v, want close %d", err, code)
		}
		if ce.Code != code {
			c.t.Fatalf("closed with %d %q, want %d", ce.Code, ce.Reason, code)
		}
		return
	}
}

// NewRawWS wraps a graphql-transport-ws socket the test dialled itself.
func NewRawWS(t *testing.T, ws *websocket.Conn) *RawWS { return &RawWS{t: t, WS: ws} }
