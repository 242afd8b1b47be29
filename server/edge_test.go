package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/graph"
	"github.com/turngate/turngate/graph/generated"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// postRaw posts body to the GraphQL endpoint as alice (or anonymously
// when tok is ""), with contentType, and returns the status and the
// decoded errors.
func postRaw(t *testing.T, h *servertest.Harness, method, tok, contentType string, body []byte) (int, []byte, []gqlclient.Error) {
	t.Helper()
	req, err := http.NewRequest(method, h.Base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if tok != "" {
		req.Header.Set(h.Config.IdentityHeader, tok)
	}
	res, err := servertest.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out gqlclient.Response
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("HTTP %d: response is not a GraphQL response: %s", res.StatusCode, raw)
	}
	return res.StatusCode, raw, out.Errors
}

// TestMalformedBodiesRefusedAtTheEdge: a body that is not a JSON object of
// valid UTF-8 (lone surrogate escapes included), the wrong media type or
// method, gets a coded error before any authentication, never echoes the
// body, and writes nothing.
func TestMalformedBodiesRefusedAtTheEdge(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	team := servertest.Rooms(t, h.Client(t, alice))["Team room"].ID
	tok, err := server.MintDev(h.Signer, alice, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	submitBody := func(text string) []byte {
		return []byte(`{"query":"mutation($c: ID!, $t: String!) { submitMessage(input: {conversationId: $c, text: $t, idempotencyKey: \"edge\"}) { id } }","variables":{"c":"` + team + `","t":"` + text + `"}}`)
	}
	const secret = "SECRET-BODY-MARKER"
	tests := []struct {
		name        string
		method      string
		contentType string
		body        []byte
		status      int
	}{
		{"not JSON", http.MethodPost, "application/json", []byte("this is not json " + secret), http.StatusBadRequest},
		{"truncated JSON", http.MethodPost, "application/json", []byte(`{"query": "{ me { id } }", "x": "` + secret), http.StatusBadRequest},
		{"a JSON array", http.MethodPost, "application/json", []byte(`[{"query": "{ me { id } }"}, "` + secret + `"]`), http.StatusBadRequest},
		{"invalid UTF-8", http.MethodPost, "application/json", submitBody("caf\xe9 " + secret), http.StatusBadRequest},
		{"lone high surrogate", http.MethodPost, "application/json", submitBody(`\ud800 ` + secret), http.StatusBadRequest},
		{"lone low surrogate", http.MethodPost, "application/json", submitBody(`\udc00 ` + secret), http.StatusBadRequest},
		{"reversed pair", http.MethodPost, "application/json", submitBody(`\udc00\ud800 ` + secret), http.StatusBadRequest},
		{"query not a string", http.MethodPost, "application/json", []byte(`{"query": 1, "x": "` + secret + `"}`), http.StatusBadRequest},
		{"variables not an object", http.MethodPost, "application/json", []byte(`{"query": "{ me { id } }", "variables": "` + secret + `"}`), http.StatusBadRequest},
		{"operationName not a string", http.MethodPost, "application/json", []byte(`{"query": "{ me { id } }", "operationName": ["` + secret + `"]}`), http.StatusBadRequest},
		{"text/plain", http.MethodPost, "text/plain", []byte(`{"query": "{ me { id } }"}`), http.StatusUnsupportedMediaType},
		{"PUT", http.MethodPut, "application/json", []byte(`{"query": "{ me { id } }"}`), http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, who := range []string{"anonymous", "alice"} {
				auth := ""
				if who == "alice" {
					auth = tok
				}
				before := counts(t, h)
				status, raw, errs := postRaw(t, h, tt.method, auth, tt.contentType, tt.body)
				if status != tt.status {
					t.Fatalf("%s: HTTP %d, want %d: %s", who, status, tt.status, raw)
				}
				servertest.CheckCoded(t, errs, "BAD_USER_INPUT")
				if bytes.Contains(raw, []byte(secret)) {
					t.Fatalf("%s: the response echoes the body: %s", who, raw)
				}
				if after := counts(t, h); after != before {
					t.Fatalf("%s: database changed: %+v -> %+v", who, before, after)
				}
			}
		})
	}
	// A valid surrogate pair is a character like any other.
	status, raw, errs := postRaw(t, h, http.MethodPost, tok, "application/json", submitBody(`pair \ud83d\ude00`))
	if status != http.StatusOK || len(errs) != 0 {
		t.Fatalf("a valid surrogate pair: HTTP %d %s", status, raw)
	}
}

// TestMalformedGETRefused: a GET's variables that are not a JSON object,
// invalid UTF-8 in its parameters, and a mutation over GET get coded
// errors and write nothing.
func TestMalformedGETRefused(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	tok, err := server.MintDev(h.Signer, alice, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, rawQuery string }{
		{"variables not JSON", "query=" + url.QueryEscape("{ me { id } }") + "&variables=SECRET"},
		{"variables an array", "query=" + url.QueryEscape("{ me { id } }") + "&variables=" + url.QueryEscape("[1]")},
		{"extensions not JSON", "query=" + url.QueryEscape("{ me { id } }") + "&extensions=%7B"},
		{"invalid UTF-8", "query=" + url.QueryEscape("{ documents(query: \"caf\xe9\") { id } }")},
		{"a mutation", "query=" + url.QueryEscape(`mutation { createConversation(input: {title: "via GET", kind: SHARED}) { id } }`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := counts(t, h)
			req, err := http.NewRequest(http.MethodGet, h.Base+"/graphql?"+tt.rawQuery, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(h.Config.IdentityHeader, tok)
			res, err := servertest.HTTPClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var out gqlclient.Response
			if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
				t.Fatalf("HTTP %d: not a GraphQL response: %v", res.StatusCode, err)
			}
			servertest.CheckCoded(t, out.Errors, "BAD_USER_INPUT")
			if strings.Contains(out.Errors[0].Message, "SECRET") {
				t.Fatalf("the error echoes the request: %s", out.Errors[0].Message)
			}
			if after := counts(t, h); after != before {
				t.Fatalf("database changed: %+v -> %+v", before, after)
			}
		})
	}
}

// TestHostileStringsRefused: a NUL anywhere, text of only invisible
// characters, and an enum value in the wrong case are refused with
// BAD_USER_INPUT (or GRAPHQL_VALIDATION_FAILED), never INTERNAL, and write
// nothing — through variables and through literals alike.
func TestHostileStringsRefused(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx := context.Background()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	nul := "a\x00b"
	tests := []struct {
		name  string
		query string
		vars  map[string]any
		codes []string
	}{
		{"NUL in message text", servertest.SubmitMutation, map[string]any{"c": team, "t": nul, "k": "nul-1"}, nil},
		{"NUL in a conversation id", servertest.SubmitMutation, map[string]any{"c": team + "\x00", "t": "hi", "k": "nul-2"}, nil},
		{"NUL in an idempotency key", servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": "k\x00"}, nil},
		{"NUL in conversation(id)", `query($c: ID!) { conversation(id: $c) { id } }`, map[string]any{"c": nul}, nil},
		{"NUL in journal", `query($c: ID!) { journal(conversationId: $c) { head } }`, map[string]any{"c": nul}, nil},
		{"NUL in a room title", `mutation($t: String!) { createConversation(input: {title: $t, kind: SHARED}) { id } }`, map[string]any{"t": nul}, nil},
		{"NUL in documents(query)", `query($q: String) { documents(query: $q) { id } }`, map[string]any{"q": nul}, nil},
		{"NUL in a query literal", `{ documents(query: "a\u0000b") { id } }`, nil, nil},
		{"NUL in a list element", `mutation($c: ID!, $d: [ID!]) { submitMessage(input: {conversationId: $c, text: "hi", idempotencyKey: "nul-3", documentIds: $d}) { id } }`,
			map[string]any{"c": team, "d": []string{"7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11\x00"}}, nil},
		{"zero-width text", servertest.SubmitMutation, map[string]any{"c": team, "t": "\u200b\u200c\u200d\u2060\ufeff", "k": "zw-1"}, nil},
		{"invisible fillers", servertest.SubmitMutation, map[string]any{"c": team, "t": " \u3164 \u00ad\u180e ", "k": "zw-2"}, nil},
		{"zero-width room title", `mutation { createConversation(input: {title: "\u200b\u200b", kind: SHARED}) { id } }`, nil, nil},
		{"lowercase enum in variables", `mutation($i: CreateConversationInput!) { createConversation(input: $i) { id } }`,
			map[string]any{"i": map[string]any{"title": "x", "kind": "shared"}}, []string{"BAD_USER_INPUT", "GRAPHQL_VALIDATION_FAILED"}},
		{"lowercase enum as a variable", `mutation($k: ConversationKind!) { createConversation(input: {title: "x", kind: $k}) { id } }`,
			map[string]any{"k": "shared"}, []string{"BAD_USER_INPUT", "GRAPHQL_VALIDATION_FAILED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.codes
			if want == nil {
				want = []string{"BAD_USER_INPUT"}
			}
			before := counts(t, h)
			res, err := a.Raw(ctx, gqlclient.Request{Query: tt.query, Variables: tt.vars})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) == 0 {
				t.Fatalf("accepted: %s", res.Data)
			}
			code := res.Errors[0].Code()
			ok := false
			for _, w := range want {
				ok = ok || code == w
			}
			if !ok {
				t.Fatalf("code = %q (%s), want one of %v", code, res.Errors[0].Message, want)
			}
			servertest.CheckCoded(t, res.Errors, code)
			if after := counts(t, h); after != before {
				t.Fatalf("database changed: %+v -> %+v", before, after)
			}
		})
	}
	// Text with a visible character among invisible ones is a message.
	if err := a.Do(ctx, servertest.SubmitMutation, map[string]any{"c": team, "t": "\u200bhi\u200b", "k": "zw-ok"}, nil); err != nil {
		t.Fatalf("visible text refused: %v", err)
	}
}

// panicky wraps the real resolvers with ones forced to panic: the me
// query, a journal subscription in its resolver (conversationId
// "panic-now"), and a journal subscription's goroutine after one entry.
type panicky struct{ *graph.Resolver }

func (p panicky) Query() generated.QueryResolver { return panickyQuery{p.Resolver.Query()} }
func (p panicky) Subscription() generated.SubscriptionResolver {
	return panickySubscription{p.Resolver.Subscription()}
}

type panickyQuery struct{ generated.QueryResolver }

func (panickyQuery) Me(context.Context) (*model.Member, error) {
	panic("forced panic in a query resolver")
}

type panickySubscription struct{ generated.SubscriptionResolver }

func (s panickySubscription) Journal(ctx context.Context, id string, after *int64) (<-chan *model.JournalEntry, error) {
	if id == "panic-now" {
		panic("forced panic in a subscription resolver")
	}
	real, err := s.SubscriptionResolver.Journal(ctx, id, after)
	if err != nil {
		return nil, err
	}
	return graph.Stream(ctx, nil, func(ctx context.Context, emit func(*model.JournalEntry) error) error {
		select {
		case e := <-real:
			if err := emit(e); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		panic("forced panic in a subscription goroutine")
	}), nil
}

// TestPanicIsInternalForOneOperation: a resolver or subscription
// goroutine that panics ends that one operation with INTERNAL — over
// HTTP, WebSocket and SSE — and the server keeps serving.
func TestPanicIsInternalForOneOperation(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) {
		server.WrapResolvers(c, func(r *graph.Resolver) generated.ResolverRoot { return panicky{r} })
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	journalSub := `subscription($c: ID!) { journal(conversationId: $c) { seq kind } }`
	stillServes := func(t *testing.T) {
		t.Helper()
		if got := servertest.Rooms(t, a); got["Team room"].ID != team {
			t.Fatalf("the server stopped serving: %v", got)
		}
	}

	t.Run("HTTP query", func(t *testing.T) {
		res, err := a.Raw(ctx, gqlclient.Request{Query: `{ me { id } }`})
		if err != nil {
			t.Fatal(err)
		}
		servertest.CheckCoded(t, res.Errors, "INTERNAL")
		if res.Errors[0].Message != "internal error" {
			t.Fatalf("message = %q: a panic's detail reached the client", res.Errors[0].Message)
		}
		stillServes(t)
	})

	for _, tt := range []struct{ name, room string }{{"resolver", "panic-now"}, {"goroutine", team}} {
		t.Run("SSE "+tt.name, func(t *testing.T) {
			ch, err := a.SSE(ctx, gqlclient.Request{Query: journalSub, Variables: map[string]any{"c": tt.room}})
			if err != nil {
				t.Fatal(err)
			}
			var last gqlclient.Response
			n := 0
			for r := range ch {
				last, n = r, n+1
			}
			servertest.CheckCoded(t, last.Errors, "INTERNAL")
			if tt.name == "goroutine" && n != 2 {
				t.Fatalf("%d responses, want the entry before the panic and the error", n)
			}
			stillServes(t)
		})
		t.Run("WebSocket "+tt.name, func(t *testing.T) {
			conn, err := gqlclient.Dial(ctx, h.Base+"/graphql", a.Header, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ch, err := conn.Subscribe(ctx, "1", gqlclient.Request{Query: journalSub, Variables: map[string]any{"c": tt.room}})
			if err != nil {
				t.Fatal(err)
			}
			var errs []gqlclient.Error
			for m := range ch {
				if m.Type == "complete" {
					break
				}
				var payload struct {
					Errors []gqlclient.Error `json:"errors"`
				}
				if m.Type == "error" {
					json.Unmarshal(m.Payload, &payload.Errors)
				} else {
					json.Unmarshal(m.Payload, &payload)
				}
				errs = append(errs, payload.Errors...)
			}
			servertest.CheckCoded(t, errs, "INTERNAL")
			// The connection survives its subscription's panic.
			ch2, err := conn.Subscribe(ctx, "2", gqlclient.Request{Query: journalSub, Variables: map[string]any{"c": team}})
			if err != nil {
				t.Fatal(err)
			}
			if m := <-ch2; m.Type != "next" {
				t.Fatalf("after the panic the connection answers %s: %s", m.Type, m.Payload)
			}
			stillServes(t)
		})
	}
}

// TestCommandRateLimit: a member's commands past their token bucket are
// RATE_LIMITED with retryAfterMs, run nothing, and leave other members
// alone; after the wait the same command is accepted.
func TestCommandRateLimit(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) {
		c.NoRunner = true
		c.Limits.CommandRate, c.Limits.CommandBurst = 0.5, 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := h.Client(t, alice), h.Client(t, bob)
	team := servertest.Rooms(t, a)["Team room"].ID
	for i := range 3 {
		if err := a.Do(ctx, servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": "rl-" + string(rune('a'+i))}, nil); err != nil {
			t.Fatalf("submit %d within the burst: %v", i, err)
		}
	}
	before := counts(t, h)
	res, err := a.Raw(ctx, gqlclient.Request{Query: servertest.SubmitMutation, Variables: map[string]any{"c": team, "t": "hi", "k": "rl-over"}})
	if err != nil {
		t.Fatal(err)
	}
	servertest.CheckCoded(t, res.Errors, "RATE_LIMITED")
	wait, ok := res.Errors[0].Extensions["retryAfterMs"].(float64)
	if !ok || wait <= 0 || wait > 2000 {
		t.Fatalf("retryAfterMs = %v, want (0, 2000] at one every 2 s", res.Errors[0].Extensions["retryAfterMs"])
	}
	if after := counts(t, h); after != before {
		t.Fatalf("a refused command wrote: %+v -> %+v", before, after)
	}
	// Steering and cancelling draw from the same bucket.
	cancelQ := `mutation($t: ID!) { cancelTurn(input: {commandId: "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11", turnId: $t}) { id } }`
	if err := a.Do(ctx, cancelQ, map[string]any{"t": "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e12"}, nil); gqlclient.CodeOf(err) != "RATE_LIMITED" {
		t.Fatalf("cancel past the bucket: %v", err)
	}
	// Queries are not commands, and bob has a bucket of his own.
	servertest.Rooms(t, a)
	if err := b.Do(ctx, servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": "rl-bob"}, nil); err != nil {
		t.Fatalf("bob is limited by alice's commands: %v", err)
	}
	// Retried after the wait it says, the same command is accepted.
	for {
		select {
		case <-ctx.Done():
			t.Fatal("never accepted again")
		case <-time.After(time.Duration(wait) * time.Millisecond):
		}
		err := a.Do(ctx, servertest.SubmitMutation, map[string]any{"c": team, "t": "hi", "k": "rl-over"}, nil)
		if err == nil {
			break
		}
		if gqlclient.CodeOf(err) != "RATE_LIMITED" {
			t.Fatal(err)
		}
	}
}

// TestEveryMutationIsACommand: every mutation writes, so every one draws
// from the member's command bucket: a burst of createConversation past it
// is RATE_LIMITED and creates no more rooms, and then each other mutation
// — the room's members, resumeTurn, the commands, every admin mutation —
// is RATE_LIMITED too and changes nothing. The table covers the schema's
// every mutation, so a new one cannot go uncounted unnoticed.
func TestEveryMutationIsACommand(t *testing.T) {
	t.Parallel()
	const burst = 3
	h := servertest.New(t, func(c *server.Config) {
		c.NoRunner = true
		// One token in 1000 s: the bucket does not refill during the test.
		c.Limits.CommandRate, c.Limits.CommandBurst = 0.001, burst
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	team := servertest.Rooms(t, a)["Team room"].ID
	create := `mutation($t: String!) { createConversation(input: {title: $t, kind: SHARED}) { id } }`
	for i := range burst {
		if err := a.Do(ctx, create, map[string]any{"t": fmt.Sprint("burst ", i)}, nil); err != nil {
			t.Fatalf("createConversation %d within the burst: %v", i, err)
		}
	}
	before, adminBefore := counts(t, h), servertest.AdminState(t, h)
	for i := range 5 {
		res, err := a.Raw(ctx, gqlclient.Request{Query: create, Variables: map[string]any{"t": fmt.Sprint("over ", i)}})
		if err != nil {
			t.Fatal(err)
		}
		servertest.CheckCoded(t, res.Errors, "RATE_LIMITED")
		if _, ok := res.Errors[0].Extensions["retryAfterMs"].(float64); !ok {
			t.Fatalf("createConversation past the bucket has no retryAfterMs: %+v", res.Errors[0])
		}
	}
	if after := counts(t, h); after != before {
		t.Fatalf("createConversation past the bucket wrote: %+v -> %+v", before, after)
	}

	id := "7d9c8a63-9a43-4c2f-8e55-3c1a2b9f0e11"
	version := `{controller: "react", modelRoute: "builtin"}`
	mutations := map[string]string{
		"createConversation": `mutation { createConversation(input: {title: "one more", kind: PRIVATE}) { id } }`,
		"renameConversation": `mutation { renameConversation(input: {conversationId: "` + team + `", title: "renamed"}) { id } }`,
		"addRoomMember":      `mutation { addRoomMember(input: {conversationId: "` + team + `", email: "carol@example.com"}) { id } }`,
		"removeRoomMember":   `mutation { removeRoomMember(input: {conversationId: "` + team + `", email: "bob@example.com"}) { id } }`,
		"submitMessage":      `mutation { submitMessage(input: {conversationId: "` + team + `", text: "hi", idempotencyKey: "k"}) { id } }`,
		"resumeTurn":         `mutation { resumeTurn(input: {turnId: "` + id + `"}) { id } }`,
		"cancelTurn":         `mutation { cancelTurn(input: {commandId: "` + id + `", turnId: "` + id + `"}) { id } }`,
		"steerTurn":          `mutation { steerTurn(input: {commandId: "` + id + `", turnId: "` + id + `", text: "go"}) { commandId } }`,
		"decideApproval":     `mutation { decideApproval(input: {approvalId: "` + id + `", decision: APPROVE}) { id } }`,
		"addDocument":        `mutation { addDocument(input: {title: "T", body: "B", readers: []}) { id } }`,
		"replaceDocument":    `mutation { replaceDocument(input: {documentId: "` + id + `", body: "B"}) { id } }`,
		"setDocumentReaders": `mutation { setDocumentReaders(input: {documentId: "` + id + `", readers: []}) { id } }`,
		"deleteDocument":     `mutation { deleteDocument(input: {documentId: "` + id + `"}) }`,
		"grantPermission":    `mutation { grantPermission(input: {email: "bob@example.com", permission: "admin:agents"}) { id } }`,
		"revokePermission":   `mutation { revokePermission(input: {email: "alice@example.com", permission: "documents.read"}) { id } }`,
		"addGroupMember":     `mutation { addGroupMember(input: {email: "bob@example.com", group: "ops"}) { id } }`,
		"removeGroupMember":  `mutation { removeGroupMember(input: {email: "alice@example.com", group: "eng"}) { id } }`,
		"createAgent":        `mutation { createAgent(input: {slug: "helper", name: "Helper", version: ` + version + `}) { id } }`,
		"addAgentVersion":    `mutation { addAgentVersion(input: {slug: "assistant", version: ` + version + `}) { id } }`,
		"setMemberRoster":    `mutation { setMemberRoster(input: {email: "alice@example.com", agent: "assistant", specialists: []}) { id } }`,
	}
	var schema struct {
		Schema struct {
			MutationType struct{ Fields []struct{ Name string } } `json:"mutationType"`
		} `json:"__schema"`
	}
	if err := a.Do(ctx, `{ __schema { mutationType { fields { name } } } }`, nil, &schema); err != nil {
		t.Fatal(err)
	}
	if len(schema.Schema.MutationType.Fields) == 0 {
		t.Fatal("the schema lists no mutations")
	}
	for _, f := range schema.Schema.MutationType.Fields {
		q, ok := mutations[f.Name]
		if !ok {
			t.Errorf("mutation %s has no case here: add one", f.Name)
			continue
		}
		res, err := a.Raw(ctx, gqlclient.Request{Query: q})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) == 0 || res.Errors[0].Code() != "RATE_LIMITED" {
			t.Errorf("%s past the bucket: %+v, want RATE_LIMITED", f.Name, res.Errors)
		}
	}
	if after := counts(t, h); after != before {
		t.Errorf("mutations past the bucket wrote: %+v -> %+v", before, after)
	}
	if after := servertest.AdminState(t, h); after != adminBefore {
		t.Errorf("admin mutations past the bucket changed something:\n%s\n%s", adminBefore, after)
	}
	// Reads are not commands.
	servertest.Rooms(t, a)
}

// TestDevEnvelopeOnlyForLoopbackHost: in dev mode the explorer page (and
// the chat page) carries a ready identity envelope only when loaded by a
// loopback name, so a page of another name resolving here (DNS
// rebinding) cannot read it.
func TestDevEnvelopeOnlyForLoopbackHost(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	port := h.Base[strings.LastIndex(h.Base, ":"):]
	for _, path := range []string{"/graphiql/", "/"} {
		page := func(host string) string {
			req, err := http.NewRequest(http.MethodGet, h.Base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			res, err := servertest.HTTPClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s with Host %s: HTTP %d", path, host, res.StatusCode)
			}
			return string(raw)
		}
		for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port, "127.0.0.1"} {
			if !strings.Contains(page(host), "eyJ") {
				t.Errorf("Host %s: no envelope in the dev page", host)
			}
		}
		for _, host := range []string{"rebound.example" + port, "localhost.example" + port, "10.0.0.1" + port, "rebound.example"} {
			if strings.Contains(page(host), "eyJ") {
				t.Errorf("Host %s: the page carries an envelope", host)
			}
		}
	}
}

// TestFieldCountBounded: a document of more field selections than
// MaxFields is refused before validation, whose cost is quadratic in
// overlapping fields (64 KiB of "id id id ..." took some 16 s of CPU):
// the refusal comes back within the client's deadline. Documents of
// ordinary size, introspection included, pass.
func TestFieldCountBounded(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	a := h.Client(t, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, q := range []string{
		"{ me { " + strings.Repeat("id ", 21000) + "} }",
		"{ " + strings.Repeat("a: me { id } ", 5000) + "}",
		"query { ...F } fragment F on Query { me { " + strings.Repeat("id ", 501) + "} }",
	} {
		res, err := a.Raw(ctx, gqlclient.Request{Query: q})
		if err != nil {
			t.Fatalf("%.40s…: %v", q, err)
		}
		servertest.CheckCoded(t, res.Errors, "GRAPHQL_VALIDATION_FAILED")
	}
	res, err := a.Raw(ctx, gqlclient.Request{Query: "{ me { " + strings.Repeat("id ", 400) + "} }"})
	if err != nil || len(res.Errors) != 0 {
		t.Fatalf("400 fields: %v %v", err, res.Errors)
	}
}
