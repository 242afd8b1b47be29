package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// Tests of what a request without a valid identity envelope can make a
// replica spend (DESIGN §10): every document is bounded before it is
// parsed (tokens) and before it is validated (selections and fragment
// definitions), documents being parsed share a replica-wide budget, and a
// stream without a valid envelope runs nothing and holds nothing for long.

// hostileShapes are documents an anonymous attacker sends to spend a
// replica's CPU or memory: request(i, size) is size bytes of document,
// distinct for each i (a leading comment misses the parsed-query cache).
var hostileShapes = []servertest.HeavyShape{
	// Validation's overlapping-fields rule is quadratic in spreads: some
	// 13,000 of them took half a second of CPU.
	{Name: "spread bomb", Request: func(i, size int) gqlclient.Request {
		return gqlclient.Request{Query: servertest.FillQuery(fmt.Sprintf("# %d\nquery {", i), " ...F", " } fragment F on Query { __typename }", size)}
	}},
	// A node of some 200 bytes a value: 6 MB of tree at parse time.
	{Name: "list literal", Request: func(i, size int) gqlclient.Request { return servertest.HeavyShapes[1].Request(i, size) }},
	// ofType chains, as deep as the bytes go.
	{Name: "deep nesting", Request: func(i, size int) gqlclient.Request {
		head := fmt.Sprintf("# %d\n{ __type(name: \"Query\") {", i)
		levels := (size - len(head) - 10) / len(" ofType { name }")
		q := head + strings.Repeat(" ofType {", levels) + " name" + strings.Repeat(" }", levels) + " }"
		return gqlclient.Request{Query: q + strings.Repeat(" ", max(0, size-len(q)))}
	}},
	{Name: "many fields", Request: func(i, size int) gqlclient.Request {
		return gqlclient.Request{Query: servertest.FillQuery(fmt.Sprintf("# %d\n{", i), " __typename", " }", size)}
	}},
}

// TestAnonymousDocumentsBoundedBeforeParsing: a 64 KiB hostile document
// sent without an envelope is refused by the anonymous token bound, which
// a lexer pass decides before anything is parsed — PAYLOAD_TOO_LARGE. What
// an anonymous caller may still do is run __typename and introspection
// (GraphiQL's query included). A member's documents have the wider bounds:
// the list literal runs, and the others are refused before validation.
func TestAnonymousDocumentsBoundedBeforeParsing(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	anon, member := h.ClientWithToken(""), h.Client(t, alice)
	for i, shape := range append(slices.Clone(hostileShapes), servertest.HeavyShapes[0]) {
		req := shape.Request(i, server.DefaultMaxQuery)
		if len(req.Query) != server.DefaultMaxQuery {
			t.Fatalf("%s: %d bytes, want %d", shape.Name, len(req.Query), server.DefaultMaxQuery)
		}
		t.Run(shape.Name, func(t *testing.T) {
			res, err := anon.Raw(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			servertest.CheckCoded(t, res.Errors, "PAYLOAD_TOO_LARGE")
			if len(res.Data) > 0 && string(res.Data) != "null" {
				t.Fatalf("refused, yet data = %s", res.Data)
			}
		})
	}
	for _, tt := range []struct {
		name string
		req  gqlclient.Request
	}{
		{"__typename", gqlclient.Request{Query: `{ __typename }`}},
		{"GraphiQL introspection", gqlclient.Request{Query: graphiQLIntrospection, OperationName: "IntrospectionQuery"}},
	} {
		res, err := anon.Raw(ctx, tt.req)
		if err != nil || res.Err() != nil || len(res.Data) < len(`{"__typename":"Query"}`) {
			t.Fatalf("anonymous %s: %v %v %s", tt.name, err, res.Err(), res.Data)
		}
	}

	// A member: the list literal runs; the other shapes select too much.
	for i, shape := range hostileShapes {
		res, err := member.Raw(ctx, shape.Request(1000+i, server.DefaultMaxQuery))
		if err != nil {
			t.Fatal(err)
		}
		if shape.Name == "list literal" {
			if err := res.Err(); err != nil {
				t.Fatalf("member, %s: %v", shape.Name, err)
			}
			continue
		}
		if len(res.Errors) == 0 {
			t.Fatalf("member, %s: ran", shape.Name)
		}
		if code := res.Errors[0].Code(); code != "GRAPHQL_VALIDATION_FAILED" && code != "PAYLOAD_TOO_LARGE" {
			t.Fatalf("member, %s: %s %s", shape.Name, code, res.Errors[0].Message)
		}
	}
}

// TestSpreadsAndFragmentsCounted: fragment spreads count as selections —
// each spread, also of one fragment again and again — fragment
// definitions have a bound of their own, and so do the selections once
// every spread is expanded, all decided before validation
// (GRAPHQL_VALIDATION_FAILED). Documents within the bounds run.
func TestSpreadsAndFragmentsCounted(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	spreads := func(n int) string {
		return "query {" + strings.Repeat(" ...F", n) + " } fragment F on Query { __typename }"
	}
	fragments := func(n int) string {
		var q, defs strings.Builder
		q.WriteString("query {")
		for i := range n {
			fmt.Fprintf(&q, " ...F%d", i)
			fmt.Fprintf(&defs, " fragment F%d on Query { __typename }", i)
		}
		return q.String() + " }" + defs.String()
	}
	// doubling(n): each of n fragments spreads the one before twice: 2n
	// spreads as written, 2^n selections once expanded, which gqlgen's
	// complexity walk visits one by one (25 deep took 18 s).
	doubling := func(n int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "query { ...F%d } fragment F0 on Query { __typename }", n)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, " fragment F%d on Query { ...F%d ...F%d }", i, i-1, i-1)
		}
		return b.String()
	}
	tests := []struct {
		name  string
		query string
		code  string // "" when it runs
	}{
		{"fragments doubling 8 deep", doubling(8), ""},
		{"fragments doubling 40 deep", doubling(40), "GRAPHQL_VALIDATION_FAILED"},
		{"MaxFields-1 spreads of one fragment", spreads(server.DefaultMaxFields - 1), ""},
		{"MaxFields spreads of one fragment", spreads(server.DefaultMaxFields), "GRAPHQL_VALIDATION_FAILED"},
		{"13,000 spreads", spreads(13000), "GRAPHQL_VALIDATION_FAILED"},
		{"MaxFragments fragments", fragments(server.DefaultMaxFragments), ""},
		{"MaxFragments+1 fragments", fragments(server.DefaultMaxFragments + 1), "GRAPHQL_VALIDATION_FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			res, err := a.Raw(ctx, gqlclient.Request{Query: tt.query})
			if err != nil {
				t.Fatal(err)
			}
			if tt.code == "" {
				if err := res.Err(); err != nil {
					t.Fatal(err)
				}
				return
			}
			servertest.CheckCoded(t, res.Errors, tt.code)
		})
	}
}

// TestComplexityRefusalIs422: an operation over the complexity limit is
// answered like every other validation failure: HTTP 422 with
// GRAPHQL_VALIDATION_FAILED. Here six aliases of me spread a fragment of
// 100 fields: 112 selections as written, 606 once expanded.
func TestComplexityRefusalIs422(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true })
	tok, err := server.MintDev(h.Signer, alice, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var q strings.Builder
	q.WriteString("{")
	for i := range 6 {
		fmt.Fprintf(&q, " m%d: me { ...M }", i)
	}
	q.WriteString(" } fragment M on Member {")
	for i := range 100 {
		fmt.Fprintf(&q, " f%d: id", i)
	}
	q.WriteString(" }")
	body, err := json.Marshal(gqlclient.Request{Query: q.String()})
	if err != nil {
		t.Fatal(err)
	}
	status, raw, errs := postRaw(t, h, http.MethodPost, tok, "application/json", body)
	servertest.CheckCoded(t, errs, "GRAPHQL_VALIDATION_FAILED")
	if !strings.Contains(errs[0].Message, "complexity") {
		t.Fatalf("message %q: not the complexity refusal", errs[0].Message)
	}
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("HTTP %d %s, want 422", status, raw)
	}
}

// TestUnauthenticatedStreamsHoldNothing: with the anonymous stream budget
// (MaxStreams) full, a stream with an invalid or expired envelope is
// still UNAUTHENTICATED, never RATE_LIMITED: an upgrade is accepted and
// its subscribe is answered with an `error` and the close 4401, an SSE
// request and a plain POST get HTTP 401. An anonymous socket runs
// nothing: its subscribe is answered the same way, and one that only
// answers pings is closed with 4401 once WSInitTimeout has passed since
// its upgrade, so that anonymous sockets cannot hold the budget. Members
// are unaffected throughout.
func TestUnauthenticatedStreamsHoldNothing(t *testing.T) {
	t.Parallel()
	const lifetime = 2 * time.Second
	h := servertest.New(t, func(c *server.Config) {
		c.NoRunner = true
		c.Limits.MaxStreams = 2
		c.Limits.WSInitTimeout = lifetime
		c.Limits.WSPing = 100 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	room := servertest.Rooms(t, h.Client(t, alice))["Team room"]
	expired, err := h.Signer.MintClaims(map[string]any{
		"sub": authority.DevSubject(alice), "email": alice, "email_verified": true,
		"iss": h.Config.EnvelopeIssuer, "aud": h.Config.EnvelopeAud,
		"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix(),
	})
	if err != nil {
		t.Fatal(err)
	}

	// Two anonymous sockets fill the anonymous budget.
	idle := servertest.DialRaw(t, ctx, h, "")
	idle.Init(ctx)
	asking := servertest.DialRaw(t, ctx, h, "")
	asking.Init(ctx)

	// An expired envelope is told so, over every transport.
	for _, tok := range []string{expired, "not-a-jwt"} {
		ws, res, err := websocket.Dial(ctx, strings.Replace(h.Base, "http", "ws", 1)+"/graphql", &websocket.DialOptions{
			HTTPHeader:   http.Header{h.Config.IdentityHeader: {tok}},
			Subprotocols: []string{"graphql-transport-ws"},
		})
		if err != nil {
			status := 0
			if res != nil {
				status = res.StatusCode
			}
			t.Fatalf("upgrade with an invalid envelope: HTTP %d: %v", status, err)
		}
		bad := servertest.NewRawWS(t, ws)
		t.Cleanup(func() { ws.CloseNow() })
		bad.Init(ctx)
		bad.Subscribe(ctx, "j", journalFrom(room))
		if m := bad.Read(ctx); m.Type != "error" || m.ID != "j" || !containsCode(m.Payload, "UNAUTHENTICATED") {
			t.Fatalf("subscribe with an invalid envelope: %s %s %s", m.ID, m.Type, m.Payload)
		}
		bad.AwaitClose(ctx, 4401)

		body, err := json.Marshal(journalFrom(room))
		if err != nil {
			t.Fatal(err)
		}
		for _, accept := range []string{"text/event-stream", "application/json"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.Base+"/graphql", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(h.Config.IdentityHeader, tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
			checkUnauthorized(t, "POST "+accept+" with an invalid envelope", req)
		}
	}
	// An SSE request without an envelope is told so too, before any budget.
	sse, err := http.NewRequestWithContext(ctx, http.MethodPost, h.Base+"/graphql",
		strings.NewReader(`{"query":"subscription($c: ID!) { journal(conversationId: $c) { seq } }","variables":{"c":"`+room.ID+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	sse.Header.Set("Content-Type", "application/json")
	sse.Header.Set("Accept", "text/event-stream")
	checkUnauthorized(t, "SSE without an envelope", sse)

	// An anonymous subscribe runs nothing and ends the socket.
	asking.Subscribe(ctx, "j", journalFrom(room))
	if m := asking.Read(ctx); m.Type != "error" || !containsCode(m.Payload, "UNAUTHENTICATED") {
		t.Fatalf("anonymous subscribe: %s %s", m.Type, m.Payload)
	}
	asking.AwaitClose(ctx, 4401)
	// One that keeps answering pings ends at its lifetime all the same.
	idle.AwaitClose(ctx, 4401)

	// The budget is free again, and a member was never in it.
	for {
		ws, _, err := websocket.Dial(ctx, strings.Replace(h.Base, "http", "ws", 1)+"/graphql", &websocket.DialOptions{
			Subprotocols: []string{"graphql-transport-ws"},
		})
		if err == nil {
			ws.CloseNow()
			break
		}
		pause(ctx, t, 20*time.Millisecond)
	}
	member := servertest.DialRaw(t, ctx, h, alice)
	member.Init(ctx)
	member.Subscribe(ctx, "me", meQuery)
	if m := member.Read(ctx); m.Type != "next" || !strings.Contains(string(m.Payload), alice) {
		t.Fatalf("member: %s %s", m.Type, m.Payload)
	}
}

// checkUnauthorized fails unless req is answered HTTP 401 with an
// UNAUTHENTICATED error.
func checkUnauthorized(t *testing.T, what string, req *http.Request) {
	t.Helper()
	res, err := servertest.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out gqlclient.Response
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%s: HTTP %d (%v), want 401", what, res.StatusCode, err)
	}
	servertest.CheckCoded(t, out.Errors, "UNAUTHENTICATED")
}

// TestParseBudget: documents being parsed and validated share the
// replica's ParseBudget. While it is taken, a document not in the
// parsed-query cache is RATE_LIMITED with a retryAfter, over HTTP and over
// a WebSocket, while a cached one still runs (it costs no parse); once it
// is given back the document runs. Requests without an envelope may hold
// only a quarter of it: with that quarter taken, an anonymous document is
// refused while a member's runs.
func TestParseBudget(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.NoRunner = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	member, anon := h.Client(t, alice), h.ClientWithToken("")
	run := func(c *gqlclient.Client, query, code string) {
		t.Helper()
		res, err := c.Raw(ctx, gqlclient.Request{Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if code == "" {
			if err := res.Err(); err != nil {
				t.Fatalf("%q: %v", query, err)
			}
			return
		}
		servertest.CheckCoded(t, res.Errors, code)
		if ms, _ := res.Errors[0].Extensions["retryAfterMs"].(float64); ms <= 0 {
			t.Fatalf("%q: retryAfterMs = %v", query, res.Errors[0].Extensions["retryAfterMs"])
		}
	}
	run(member, `{ __typename }`, "")

	release, ok := server.ParseBudgetOf(h.App).TryAcquire(server.DefaultParseBudget, false)
	if !ok {
		t.Fatal("the budget is taken")
	}
	run(member, "# 1\n{ me { email } }", "RATE_LIMITED")
	run(member, `{ __typename }`, "")
	ws := servertest.DialRaw(t, ctx, h, alice)
	ws.Init(ctx)
	ws.Subscribe(ctx, "me", gqlclient.Request{Query: "# 2\n{ me { email } }"})
	if m := ws.Read(ctx); m.ID != "me" || !containsCode(m.Payload, "RATE_LIMITED") {
		t.Fatalf("WebSocket, budget taken: %s %s %s", m.ID, m.Type, m.Payload)
	}
	release()
	run(member, "# 1\n{ me { email } }", "")

	release, ok = server.ParseBudgetOf(h.App).TryAcquire(server.DefaultParseBudget/4, true)
	if !ok {
		t.Fatal("the anonymous quarter is taken")
	}
	run(anon, "# 3\n{ __typename }", "RATE_LIMITED")
	run(member, "# 4\n{ me { email } }", "")
	release()
	run(anon, "# 3\n{ __typename }", "")
}
