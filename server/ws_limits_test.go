package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// errorsOf decodes an `error` message's payload.
func errorsOf(t *testing.T, m gqlclient.Message) []gqlclient.Error {
	t.Helper()
	var errs []gqlclient.Error
	if err := json.Unmarshal(m.Payload, &errs); err != nil {
		t.Fatalf("error payload %s: %v", m.Payload, err)
	}
	return errs
}

// pause lets d pass; a test waits this way only to let a deadline go by.
func pause(ctx context.Context, t *testing.T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		t.Fatal("test deadline while waiting")
	}
}

var meQuery = gqlclient.Request{Query: `{ me { email } }`}

func journalFrom(room servertest.Room) gqlclient.Request {
	return gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room.ID, "after": room.Head}}
}

// TestWSInitTimeout: a socket that does not send connection_init within
// WSInitTimeout is closed with 4408 (graphql-transport-ws), and one that
// did keeps working after that time.
func TestWSInitTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	h := servertest.New(t, func(c *server.Config) { c.Limits.WSInitTimeout = timeout })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	silent := servertest.DialRaw(t, ctx, h, alice)
	start := time.Now()
	closeCtx, closeCancel := context.WithTimeout(ctx, 5*time.Second)
	defer closeCancel()
	silent.ExpectClose(closeCtx, 4408, "Connection initialisation timeout")
	if waited := time.Since(start); waited < timeout-50*time.Millisecond {
		t.Fatalf("closed after %v, before the %v timeout", waited, timeout)
	}

	prompt := servertest.DialRaw(t, ctx, h, alice)
	prompt.Init(ctx)
	pause(ctx, t, 3*timeout)
	prompt.Subscribe(ctx, "me", meQuery)
	if m := prompt.Read(ctx); m.Type != "next" || m.ID != "me" || !strings.Contains(string(m.Payload), alice) {
		t.Fatalf("after the init timeout: %s %s %s, want next with alice's email", m.ID, m.Type, m.Payload)
	}
}

// TestWSDuplicateSubscriptionID: a subscribe whose id is still active
// closes the socket with 4409; an id the client completed is free again at
// once, and nothing of the completed operation reaches the client after.
func TestWSDuplicateSubscriptionID(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	room := servertest.Rooms(t, h.Client(t, alice))["Team room"]

	c := servertest.DialRaw(t, ctx, h, alice)
	c.Init(ctx)
	c.Subscribe(ctx, "a", journalFrom(room))
	c.Send(ctx, gqlclient.Message{ID: "a", Type: "complete"})
	c.Subscribe(ctx, "a", journalFrom(room)) // reused right after its complete: allowed
	c.Subscribe(ctx, "q", meQuery)
	for done := false; !done; {
		m := c.Read(ctx)
		switch {
		case m.ID == "a":
			t.Fatalf("message for the journal subscription: %s %s", m.Type, m.Payload)
		case m.ID == "q" && m.Type == "next":
		case m.ID == "q" && m.Type == "complete":
			done = true
		default:
			t.Fatalf("unexpected %s %s %s", m.ID, m.Type, m.Payload)
		}
	}

	c.Subscribe(ctx, "a", journalFrom(room)) // the second "a" is active
	closeCtx, closeCancel := context.WithTimeout(ctx, 5*time.Second)
	defer closeCancel()
	c.ExpectClose(closeCtx, 4409, "Subscriber for a already exists")
}

// TestWSSubscriptionLimit: past MaxSubscriptions on one connection a
// subscribe gets an `error` (RATE_LIMITED, retryable); the connection
// stays up, the earlier subscriptions keep streaming, and completing one
// frees its slot.
func TestWSSubscriptionLimit(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.Limits.MaxSubscriptions = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := h.Client(t, alice)
	room := servertest.Rooms(t, client)["Team room"]

	c := servertest.DialRaw(t, ctx, h, alice)
	c.Init(ctx)
	c.Subscribe(ctx, "j1", journalFrom(room))
	c.Subscribe(ctx, "j2", journalFrom(room))
	c.Subscribe(ctx, "j3", journalFrom(room))
	if err := client.Do(ctx, servertest.SubmitMutation, map[string]any{"c": room.ID, "t": "over the limit", "k": "ws-limit-1"}, nil); err != nil {
		t.Fatal(err)
	}
	var refused bool
	streamed := map[string]bool{}
	for !refused || !streamed["j1"] || !streamed["j2"] {
		m := c.Read(ctx)
		switch {
		case m.ID == "j3" && m.Type == "error":
			errs := errorsOf(t, m)
			servertest.CheckCoded(t, errs, "RATE_LIMITED")
			if !strings.Contains(errs[0].Message, "at most 2") {
				t.Fatalf("message %q does not say the limit", errs[0].Message)
			}
			refused = true
		case m.ID == "j3":
			t.Fatalf("subscription past the limit got %s %s", m.Type, m.Payload)
		case m.Type == "next":
			streamed[m.ID] = true
		default:
			t.Fatalf("unexpected %s %s %s", m.ID, m.Type, m.Payload)
		}
	}

	// Completing j1 frees its slot once the server has stopped it; a
	// client at the limit retries on RATE_LIMITED.
	c.Send(ctx, gqlclient.Message{ID: "j1", Type: "complete"})
	for attempt := 4; ; attempt++ {
		id := fmt.Sprintf("j%d", attempt)
		c.Subscribe(ctx, id, journalFrom(room)) // replays the turn's entries
		m := c.Read(ctx)
		for m.ID != id {
			m = c.Read(ctx) // j2 may still be streaming
		}
		if m.Type == "next" {
			break
		}
		if m.Type != "error" || !containsCode(m.Payload, "RATE_LIMITED") {
			t.Fatalf("%s: %s %s", id, m.Type, m.Payload)
		}
		pause(ctx, t, 10*time.Millisecond)
	}
}

// TestWSSubscribeInputChecked: a subscribe message that is not valid
// UTF-8 or escapes a lone surrogate gets an `error` (BAD_USER_INPUT) for
// its id, never echoing it, and nothing runs (gqlgen alone would decode
// both to U+FFFD and submit the message); the connection stays up.
func TestWSSubscribeInputChecked(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	room := servertest.Rooms(t, h.Client(t, alice))["Team room"]
	query, err := json.Marshal(servertest.SubmitMutation)
	if err != nil {
		t.Fatal(err)
	}

	c := servertest.DialRaw(t, ctx, h, alice)
	c.Init(ctx)
	tests := []struct {
		name string
		text string // raw JSON string content
	}{
		{"lone surrogate", `hello \ud800 there`},
		{"invalid UTF-8", "hello \xff there"},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("bad-%d", i)
		key := fmt.Sprintf("never-runs-%d", i)
		msg := `{"id":"` + id + `","type":"subscribe","payload":{"query":` + string(query) +
			`,"variables":{"c":"` + room.ID + `","t":"` + tt.text + `","k":"` + key + `"}}}`
		if err := c.WS.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		m := c.Read(ctx)
		if m.ID != id || m.Type != "error" {
			t.Fatalf("%s: %s %s %s, want error for %s", tt.name, m.ID, m.Type, m.Payload, id)
		}
		servertest.CheckCoded(t, errorsOf(t, m), "BAD_USER_INPUT")
		if bytes.Contains(m.Payload, []byte(key)) || bytes.Contains(m.Payload, []byte("hello")) {
			t.Fatalf("%s: the error echoes the request: %s", tt.name, m.Payload)
		}
	}
	if head := servertest.Rooms(t, h.Client(t, alice))["Team room"].Head; head != room.Head {
		t.Fatalf("room head moved from %d to %d: a refused subscribe ran", room.Head, head)
	}
	c.Subscribe(ctx, "me", meQuery)
	if m := c.Read(ctx); m.ID != "me" || m.Type != "next" {
		t.Fatalf("after the refusals: %s %s %s", m.ID, m.Type, m.Payload)
	}
}

// openSSE starts a journal subscription over SSE as email and returns the
// response (200 with the stream open, or the refusal).
func openSSE(t *testing.T, ctx context.Context, h *servertest.Harness, email string, room servertest.Room) *http.Response {
	t.Helper()
	body, err := json.Marshal(journalFrom(room))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.Base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = servertest.IdentityHeader(t, h, email)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := servertest.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// checkTooMany fails unless res is HTTP 429 with a RATE_LIMITED error.
func checkTooMany(t *testing.T, what string, res *http.Response) {
	t.Helper()
	if res == nil {
		t.Fatalf("%s: no response, want HTTP 429", what)
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("%s: HTTP %d %s, want 429", what, res.StatusCode, raw)
	}
	var out gqlclient.Response
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: 429 body is not a GraphQL response: %s", what, raw)
	}
	servertest.CheckCoded(t, out.Errors, "RATE_LIMITED")
}

// TestStreamsPerMember: a member's WebSockets and SSE subscriptions on a
// replica are bounded together (MaxStreams); past it both an upgrade and
// an SSE request get HTTP 429 RATE_LIMITED, another member is unaffected,
// and closing either kind of stream frees a slot. Upgrades without an
// identity share one budget of the same size.
func TestStreamsPerMember(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.Limits.MaxStreams = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	room := servertest.Rooms(t, h.Client(t, alice))["Team room"]
	wsURL := strings.Replace(h.Base, "http", "ws", 1) + "/graphql"
	dial := func(email string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(ctx, wsURL, &websocket.DialOptions{
			HTTPHeader:   servertest.IdentityHeader(t, h, email),
			Subprotocols: []string{"graphql-transport-ws"},
		})
	}

	ws1, _, err := dial(alice)
	if err != nil {
		t.Fatal(err)
	}
	sseCtx, closeSSE := context.WithCancel(ctx)
	defer closeSSE()
	if res := openSSE(t, sseCtx, h, alice, room); res.StatusCode != http.StatusOK {
		t.Fatalf("SSE: HTTP %d", res.StatusCode)
	}

	_, res, err := dial(alice)
	if err == nil {
		t.Fatal("a third stream was upgraded")
	}
	checkTooMany(t, "third stream, WebSocket", res)
	checkTooMany(t, "third stream, SSE", openSSE(t, ctx, h, alice, room))

	bobWS, _, err := dial(bob)
	if err != nil {
		t.Fatalf("bob: %v", err)
	}
	defer bobWS.CloseNow()

	// Closing the WebSocket frees its slot once the server has seen it go.
	ws1.CloseNow()
	for {
		ws, res, err := dial(alice)
		if err == nil {
			ws.CloseNow()
			break
		}
		checkTooMany(t, "after closing a WebSocket", res)
		pause(ctx, t, 10*time.Millisecond)
	}
	// So does ending the SSE request.
	closeSSE()
	for {
		res := openSSE(t, ctx, h, alice, room)
		if res.StatusCode == http.StatusOK {
			break
		}
		checkTooMany(t, "after closing the SSE stream", res)
		pause(ctx, t, 10*time.Millisecond)
	}

	// Without an identity: a shared budget, and nothing runs. (A
	// subscribe ends an anonymous socket, so it comes last.)
	anon := servertest.DialRaw(t, ctx, h, "")
	anon.Init(ctx)
	servertest.DialRaw(t, ctx, h, "")
	_, res, err = dial("")
	if err == nil {
		t.Fatal("a third anonymous socket was upgraded")
	}
	checkTooMany(t, "third anonymous WebSocket", res)
	anon.Subscribe(ctx, "j", journalFrom(room))
	if m := anon.Read(ctx); !containsCode(m.Payload, "UNAUTHENTICATED") {
		t.Fatalf("anonymous subscribe: %s %s", m.Type, m.Payload)
	}
}

// TestSlowBodyCutOff: a client that sends its headers and then trickles
// the body is cut off at ReadTimeout instead of holding a connection and
// a handler for as long as it likes.
func TestSlowBodyCutOff(t *testing.T) {
	t.Parallel()
	const readTimeout = 500 * time.Millisecond
	h := servertest.New(t, func(c *server.Config) { c.Limits.ReadTimeout = readTimeout })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := server.MintDev(h.Signer, alice, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const bodyLen = 4096 // at one byte per 20ms: 80s
	start := time.Now()
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s: %s\r\n\r\n",
		strings.TrimPrefix(h.Base, "http://"), bodyLen, h.Config.IdentityHeader, tok)
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < bodyLen; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{' '}); err != nil {
				return
			}
		}
	}()

	// The server answers (with an error) and closes, or just closes.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	if res, err := http.ReadResponse(br, nil); err == nil {
		if res.StatusCode < 400 {
			t.Fatalf("a trickled body got HTTP %d", res.StatusCode)
		}
		io.Copy(io.Discard, res.Body)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection is still open after the response")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection was not cut off within %v of a %v ReadTimeout", time.Since(start), readTimeout)
	}
	if elapsed := time.Since(start); elapsed < readTimeout-50*time.Millisecond {
		t.Fatalf("cut off after %v, before ReadTimeout", elapsed)
	}
	conn.Close()
	<-trickled
}

// TestStreamsOutliveReadTimeout: ReadTimeout bounds reading a request,
// not the stream that answers it: an SSE subscription and a WebSocket
// subscription opened before the deadline both deliver an entry written
// well after it.
func TestStreamsOutliveReadTimeout(t *testing.T) {
	t.Parallel()
	const readTimeout = time.Second
	h := servertest.New(t, func(c *server.Config) { c.Limits.ReadTimeout = readTimeout })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := h.Client(t, alice)
	room := servertest.Rooms(t, client)["Team room"]

	sse, err := client.SSE(ctx, journalFrom(room))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := gqlclient.Dial(ctx, h.Base+"/graphql", client.Header, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ws, err := conn.Subscribe(ctx, "j", journalFrom(room))
	if err != nil {
		t.Fatal(err)
	}

	// Let the read deadline pass, failing at once if a stream ends.
	deadline := time.NewTimer(2*readTimeout + 500*time.Millisecond)
	defer deadline.Stop()
	for waiting := true; waiting; {
		select {
		case <-deadline.C:
			waiting = false
		case _, ok := <-sse:
			if !ok {
				t.Fatal("the SSE stream ended before any entry")
			}
		case _, ok := <-ws:
			if !ok {
				t.Fatal("the WebSocket subscription ended before any entry")
			}
		case <-ctx.Done():
			t.Fatal("test deadline")
		}
	}

	if err := client.Do(ctx, servertest.SubmitMutation, map[string]any{"c": room.ID, "t": "still there?", "k": "after-read-timeout"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, ok := <-sse:
		if !ok {
			t.Fatal("the SSE stream ended without the new entry")
		}
		var d struct {
			Journal servertest.WireEntry `json:"journal"`
		}
		if err := ev.Err(); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.Journal.Seq <= room.Head {
			t.Fatalf("SSE entry %s (%v), want seq > %d", ev.Data, err, room.Head)
		}
	case <-ctx.Done():
		t.Fatal("no SSE entry after the read deadline")
	}
	if e := servertest.NextJournal[servertest.WireEntry](t, ctx, ws); e.Seq <= room.Head {
		t.Fatalf("WebSocket entry seq %d, want > %d", e.Seq, room.Head)
	}
}

// TestSilentClientIsClosedAfterUnansweredPings: the server pings every
// WSPing; a client that answers keeps its connection across many pings,
// and one that stops answering is closed (1001) after two pings without
// a pong.
func TestSilentClientIsClosedAfterUnansweredPings(t *testing.T) {
	t.Parallel()
	const every = 50 * time.Millisecond
	h := servertest.New(t, func(c *server.Config) { c.Limits.WSPing = every })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	polite := servertest.DialRaw(t, ctx, h, alice)
	polite.Init(ctx)
	pings := 0
	for pings < 6 {
		var m gqlclient.Message
		if err := wsjson.Read(ctx, polite.WS, &m); err != nil {
			t.Fatalf("a client answering pings lost its connection after %d: %v", pings, err)
		}
		if m.Type == "ping" {
			pings++
			polite.Send(ctx, gqlclient.Message{Type: "pong"})
		}
	}

	silent := servertest.DialRaw(t, ctx, h, alice)
	silent.Init(ctx)
	seen := 0
	for {
		_, data, err := silent.WS.Read(ctx)
		if err == nil {
			var m gqlclient.Message
			if json.Unmarshal(data, &m) == nil && m.Type == "ping" {
				seen++
			}
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway {
			t.Fatalf("silent client's socket ended with %v, want close 1001", err)
		}
		if seen < 2 {
			t.Fatalf("closed after %d pings, want at least 2 unanswered", seen)
		}
		return
	}
}

// TestOutgoingReadsGqlgensMessageShape: outgoing reads a pointer to a
// struct shaped as gqlgen's graphql-transport-ws message (exported ID,
// Type of a string kind, Payload json.RawMessage) without encoding it,
// and declines anything else, which WriteJSON then encodes and decodes.
func TestOutgoingReadsGqlgensMessageShape(t *testing.T) {
	type kind string
	type shaped struct {
		Payload json.RawMessage `json:"payload,omitempty"`
		ID      string          `json:"id,omitempty"`
		Type    kind            `json:"type"`
	}
	m, ok := server.Outgoing(&shaped{Payload: json.RawMessage(`{"data":1}`), ID: "7", Type: "next"})
	if !ok || m.ID != "7" || m.Type != "next" || string(m.Payload) != `{"data":1}` {
		t.Fatalf("outgoing(shaped) = %+v, %v", m, ok)
	}
	for _, v := range []any{map[string]any{"type": "ping"}, shaped{}, (*shaped)(nil), &struct{ ID, Type string }{}} {
		if _, ok := server.Outgoing(v); ok {
			t.Fatalf("outgoing(%T) read a value of another shape", v)
		}
	}
}
