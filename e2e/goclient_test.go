package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	client "github.com/turngate/turngate/clients/go"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/outcome"
)

// The Go client against real turngate processes behind one front door:
// the conformance list (clients/CONFORMANCE.md) the TypeScript client's
// tests prove too.

// goWorld is one world the Go client's tests share: replicas behind a
// front door with short leases, a paced model, a small command bucket
// and frequent WebSocket pings.
type goWorld struct {
	w *e2etest.World
	f *frontDoor
}

func newGoWorld(t *testing.T) *goWorld {
	t.Helper()
	bin := e2etest.PlainBinary(t) // a client under test: see PlainBinary
	w := e2etest.NewWorld(t, bin, "turngate-go-")
	f := newFrontDoor(t, w, 1, "TURNGATE_LEASE_TTL=2s", "TURNGATE_MODEL_PACE=40ms",
		"TURNGATE_COMMAND_RATE=2", "TURNGATE_COMMAND_BURST=6", "TURNGATE_WS_PING=200ms")
	return &goWorld{w: w, f: f}
}

// client is a Go client for email through the front door; tweak adjusts its config.
func (g *goWorld) client(t *testing.T, email string, tweak func(*client.Config)) *client.Client {
	t.Helper()
	tok, err := e2etest.TokenFor(g.w.Bin, g.w.DataDir, email)
	if err != nil {
		t.Fatal(err)
	}
	cfg := client.Config{URL: g.f.base + "/graphql", Identity: client.Static(tok), HTTPClient: &http.Client{Timeout: 30 * time.Second},
		Retry: client.RetryPolicy{Window: 60 * time.Second, Base: 100 * time.Millisecond, Max: time.Second}}
	if tweak != nil {
		tweak(&cfg)
	}
	return client.New(cfg)
}

func roomOf(t *testing.T, ctx context.Context, c *client.Client, title string) string {
	t.Helper()
	rooms, err := c.Conversations(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rooms {
		if r.Title == title {
			return r.Id
		}
	}
	t.Fatalf("no room %q", title)
	return ""
}

// goFollower reads a room stream into a fold, recording states and codes.
type goFollower struct {
	s      *client.RoomStream
	mu     sync.Mutex
	fold   *client.Fold
	seqs   []int
	bodies []*client.EntryFields // every entry delivered, in order
	states []client.State
	codes  []client.Code
	change chan struct{}
}

func goFollow(t *testing.T, ctx context.Context, c *client.Client, room string) *goFollower {
	t.Helper()
	f := &goFollower{s: c.Follow(ctx, room, 0), fold: client.NewFold(0), change: make(chan struct{}, 1)}
	t.Cleanup(f.s.Close)
	go func() {
		for u := range f.s.Updates() {
			f.mu.Lock()
			if u.Entry != nil {
				f.seqs = append(f.seqs, u.Entry.Seq)
				f.bodies = append(f.bodies, u.Entry)
				f.fold.Apply(u.Entry)
			}
			if n := len(f.states); n == 0 || f.states[n-1] != u.State {
				f.states = append(f.states, u.State)
			}
			if u.Err != nil {
				f.codes = append(f.codes, u.Err.Code)
			}
			f.mu.Unlock()
			select {
			case f.change <- struct{}{}:
			default:
			}
		}
	}()
	return f
}

// until waits for cond over the goFollower's state.
func (f *goFollower) until(t *testing.T, ctx context.Context, what string, cond func(f *goFollower) bool) {
	t.Helper()
	for {
		f.mu.Lock()
		ok := cond(f)
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("waiting until %s: %v (states %v, codes %v)", what, ctx.Err(), f.states, f.codes)
		case <-f.change:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *goFollower) state() client.State {
	s, _ := f.s.State()
	return s
}

// sameAsJournal: the stream delivered exactly the journal's positions up
// to where it is, in order, none twice.
func (f *goFollower) sameAsJournal(t *testing.T, ctx context.Context, c *client.Client, room string) {
	t.Helper()
	all, err := c.Journal(ctx, room, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var want []int
	for _, e := range all {
		if e.Seq <= f.fold.Position() {
			want = append(want, e.Seq)
		}
	}
	if fmt.Sprint(f.seqs) != fmt.Sprint(want) {
		t.Fatalf("the stream delivered %v, the journal has %v", f.seqs, want)
	}
}

// interruptedIn is what the journal says a view of turn id shows as
// interrupted: the text each attempt before last streamed, when it
// streamed any (these runs discard no draft: no steers, no text before a
// tool call).
func interruptedIn(t *testing.T, ctx context.Context, c *client.Client, room, id string, last int) []client.InterruptedAnswer {
	t.Helper()
	all, err := c.Journal(ctx, room, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []client.InterruptedAnswer
	for _, e := range all {
		if e.TurnId == nil || *e.TurnId != id || e.Kind != client.JournalKindAnswerDelta || e.Delta.Attempt >= last || e.Delta.Text == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Attempt == e.Delta.Attempt {
			out[n-1].Text += e.Delta.Text
		} else {
			out = append(out, client.InterruptedAnswer{Attempt: e.Delta.Attempt, Text: e.Delta.Text})
		}
	}
	return out
}

// midAnswer submits text and waits until its answer streams.
func (f *goFollower) midAnswer(t *testing.T, ctx context.Context, c *client.Client, room, text string) string {
	t.Helper()
	turn, err := c.Submit(ctx, room, text, client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.until(t, ctx, "the answer streams", func(f *goFollower) bool { v := f.fold.Turn(turn.Id); return v != nil && v.Answer != "" })
	return turn.Id
}

func (f *goFollower) ended(t *testing.T, ctx context.Context, id string) client.TurnView {
	t.Helper()
	f.until(t, ctx, "the turn ends", func(f *goFollower) bool { v := f.fold.Turn(id); return v != nil && v.Ended() })
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.fold.Turn(id)
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestGoClientStreamResumes: conformance 4 and 5, the Go client's room
// stream through a dropped socket, a kill -9 of every replica, an
// orderly restart, a failover, many pings, and an outage longer than its
// window.
func TestGoClientStreamResumes(t *testing.T) {
	t.Parallel()
	g := newGoWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := g.client(t, alice, nil)
	team := roomOf(t, ctx, c, "Team room")

	check := func(t *testing.T, f *goFollower, id string) {
		t.Helper()
		v := f.ended(t, ctx, id)
		if v.State != client.TurnStateCompleted {
			t.Fatalf("turn ended %s", v.State)
		}
		server, err := c.Turn(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if server.Answer == nil || v.Answer != *server.Answer {
			t.Fatalf("the stream's answer %q, the server's %v", v.Answer, server.Answer)
		}
		f.sameAsJournal(t, ctx, c, team)
		// An attempt a crash cut off after it had streamed text shows as
		// interrupted, apart from the answer, which is the last
		// attempt's alone (checked above).
		want := interruptedIn(t, ctx, c, team, id, server.Attempt)
		if !slices.Equal(v.Interrupted, want) {
			t.Fatalf("the view shows interrupted %v, the journal %v (the turn ended on attempt %d)", v.Interrupted, want, server.Attempt)
		}
		t.Logf("the turn ended on attempt %d; interrupted: %d", server.Attempt, len(want))
	}
	for _, step := range []struct {
		name, question string
		fault          func()
		code           client.Code
	}{
		{"a dropped socket", "When is the launch?", g.f.drop, client.Network},
		{"kill -9 of every replica", "Where is the security policy?", func() { g.f.killAll(false); g.f.add() }, client.Network},
		{"an orderly restart", "When is the launch, after the restart?", func() { g.f.killAll(true); g.f.add() }, client.Unavailable},
		{"a failover", "When is the launch, once more?", func() { g.f.add(); g.f.killFirst() }, client.Network},
	} {
		t.Run(step.name, func(t *testing.T) {
			f := goFollow(t, ctx, c, team)
			f.until(t, ctx, "live", func(f *goFollower) bool { return f.state() == client.Live })
			id := f.midAnswer(t, ctx, c, team, step.question)
			step.fault()
			check(t, f, id)
			f.mu.Lock()
			defer f.mu.Unlock()
			if !contains(f.states, client.Reconnecting) || !contains(f.codes, step.code) {
				t.Fatalf("states %v, codes %v: want it to reconnect after %s", f.states, f.codes, step.code)
			}
		})
	}

	t.Run("many pings", func(t *testing.T) {
		f := goFollow(t, ctx, c, team)
		f.until(t, ctx, "live", func(f *goFollower) bool { return f.state() == client.Live })
		before := c.Pings()
		f.until(t, ctx, "the server pinged 40 times", func(*goFollower) bool { return c.Pings() >= before+40 })
		f.mu.Lock()
		reconnected := contains(f.states, client.Reconnecting)
		f.mu.Unlock()
		if reconnected {
			t.Fatalf("the stream reconnected during the pings (%v, %v): answering them should keep it", f.states, f.codes)
		}
		// The same subscription then rides out a restart of every replica.
		g.f.killAll(false)
		g.f.add()
		turn, err := c.Submit(ctx, team, "Still there after the pings and a restart?", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, f, turn.Id)
	})

	t.Run("an outage longer than the window", func(t *testing.T) {
		short := g.client(t, alice, func(c *client.Config) {
			c.Retry = client.RetryPolicy{Window: 1500 * time.Millisecond, Base: 100 * time.Millisecond, Max: 400 * time.Millisecond}
		})
		f := goFollow(t, ctx, short, team)
		f.until(t, ctx, "live", func(f *goFollower) bool { return f.state() == client.Live })
		down := time.Now()
		g.f.killAll(false)
		f.until(t, ctx, "offline", func(f *goFollower) bool { return f.state() == client.Offline })
		if d := time.Since(down); d < 1500*time.Millisecond {
			t.Fatalf("offline after %s, before the window", d)
		}
		if _, err := short.Me(ctx); client.CodeOf(err) != client.Network {
			t.Fatalf("a read in the outage: %v, want NETWORK", err)
		}
		g.f.add()
		f.s.Retry()
		f.until(t, ctx, "live again", func(f *goFollower) bool { return f.state() == client.Live })
		turn, err := short.Submit(ctx, team, "Are we back?", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, f, turn.Id)
	})

	t.Run("unsubscribe is clean every time", func(t *testing.T) {
		for i := range 30 {
			f := goFollow(t, ctx, c, team)
			f.until(t, ctx, fmt.Sprintf("live (%d)", i), func(f *goFollower) bool { return f.state() == client.Live && len(f.seqs) > 0 })
			f.s.Close()
		}
	})
}

// recording is an http.RoundTripper that records the error codes of the
// answers and can lose answers to chosen requests.
type recording struct {
	mu    sync.Mutex
	n     int
	codes []string
	lose  func(body string) bool
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if err != nil {
		return nil, err
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		return res, nil // a WebSocket: its body is the connection
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body = io.NopCloser(bytes.NewReader(raw))
	for _, part := range strings.Split(string(raw), `"code":"`)[1:] {
		r.codes = append(r.codes, part[:strings.Index(part, `"`)])
	}
	if r.lose != nil && r.lose(string(body)) {
		return nil, errors.New("connection reset: the answer was lost")
	}
	return res, nil
}

func (r *recording) requests() int { r.mu.Lock(); defer r.mu.Unlock(); return r.n }

// answered are the codes answered, less RATE_LIMITED (a member's command
// bucket; re-sent by rule).
func (r *recording) answered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.codes {
		if c != "RATE_LIMITED" {
			out = append(out, c)
		}
	}
	return out
}

func (r *recording) limited() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.codes) - len(r.answeredLocked())
}

func (r *recording) answeredLocked() []string {
	var out []string
	for _, c := range r.codes {
		if c != "RATE_LIMITED" {
			out = append(out, c)
		}
	}
	return out
}

// TestGoClientCommandsAndRules: conformance 1-3 and 6-8.
func TestGoClientCommandsAndRules(t *testing.T) {
	t.Parallel()
	g := newGoWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	with := func(rt http.RoundTripper) func(*client.Config) {
		return func(c *client.Config) { c.HTTPClient = &http.Client{Transport: rt, Timeout: 30 * time.Second} }
	}
	a := g.client(t, alice, nil)
	notes := roomOf(t, ctx, a, "Alice's notes")
	team := roomOf(t, ctx, a, "Team room")
	accepted := func(room, text string) []*client.EntryFields {
		all, err := a.Journal(ctx, room, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []*client.EntryFields
		for _, e := range all {
			if e.Kind == client.JournalKindTurnAccepted && e.Text != nil && *e.Text == text {
				out = append(out, e)
			}
		}
		return out
	}

	t.Run("a lost answer is re-sent with the same key: one turn", func(t *testing.T) {
		lost := 0
		rec := &recording{lose: func(body string) bool {
			if strings.Contains(body, "submitMessage") && lost < 2 {
				lost++
				return true
			}
			return false
		}}
		c := g.client(t, alice, with(rec))
		text := "one turn however often retried " + client.NewID()
		turn, err := c.Submit(ctx, notes, text, client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := accepted(notes, text); len(got) != 1 || *got[0].TurnId != turn.Id || lost != 2 {
			t.Fatalf("%d turns accepted after %d lost answers", len(got), lost)
		}
	})

	t.Run("a given key is kept; other input under it is CONFLICT, not retried", func(t *testing.T) {
		rec := &recording{}
		c := g.client(t, alice, with(rec))
		key := "key-" + client.NewID()
		first, err := c.Submit(ctx, notes, "same key", client.SubmitOptions{IdempotencyKey: key})
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Submit(ctx, notes, "same key", client.SubmitOptions{IdempotencyKey: key})
		if err != nil || again.Id != first.Id {
			t.Fatalf("the same key gave %v (%v), want turn %s", again, err, first.Id)
		}
		_, err = c.Submit(ctx, notes, "other text", client.SubmitOptions{IdempotencyKey: key})
		_, err2 := c.Submit(ctx, notes, "   ", client.SubmitOptions{})
		if client.CodeOf(err) != client.Conflict || client.CodeOf(err2) != client.BadUserInput {
			t.Fatalf("got %v and %v, want CONFLICT and BAD_USER_INPUT", err, err2)
		}
		if got := rec.answered(); fmt.Sprint(got) != "[CONFLICT BAD_USER_INPUT]" || rec.requests()-rec.limited() != 4 {
			t.Fatalf("answers %v in %d requests: each refusal must be sent once", got, rec.requests())
		}
	})

	t.Run("RATE_LIMITED submits are re-sent with their keys", func(t *testing.T) {
		rec := &recording{}
		c := g.client(t, "bob@example.com", with(rec))
		bobs := roomOf(t, ctx, c, "Bob's notes")
		batch := client.NewID()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.Submit(ctx, bobs, fmt.Sprintf("burst %d %s", i, batch), client.SubmitOptions{})
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if rec.limited() == 0 {
			t.Fatal("no submit was rate limited: the test proves nothing")
		}
		all, err := c.Journal(ctx, bobs, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range errs {
			n := 0
			for _, e := range all {
				if e.Kind == client.JournalKindTurnAccepted && e.Text != nil && *e.Text == fmt.Sprintf("burst %d %s", i, batch) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("burst %d accepted %d times", i, n)
			}
		}
	})

	t.Run("UNAUTHENTICATED asks identity once more, then fails closed", func(t *testing.T) {
		rec := &recording{}
		asked := 0
		c := g.client(t, alice, func(cfg *client.Config) {
			with(rec)(cfg)
			cfg.Identity = func(context.Context, bool) (string, error) { asked++; return "not-an-envelope", nil }
		})
		if _, err := c.Me(ctx); client.CodeOf(err) != client.Unauthenticated || asked != 2 || rec.requests() != 1 {
			t.Fatalf("Me: %v after %d identities and %d requests", err, asked, rec.requests())
		}
		f := goFollow(t, ctx, c, team)
		f.until(t, ctx, "closed", func(f *goFollower) bool { return f.state() == client.Closed })
		if _, err := f.s.State(); err == nil || err.Code != client.Unauthenticated {
			t.Fatalf("stream closed with %v", err)
		}
		good, err := e2etest.TokenFor(g.w.Bin, g.w.DataDir, alice)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		fresh := g.client(t, alice, func(cfg *client.Config) {
			cfg.Identity = func(context.Context, bool) (string, error) {
				n++
				if n == 1 {
					return "expired-envelope", nil
				}
				return good, nil
			}
		})
		if me, err := fresh.Me(ctx); err != nil || me.Email != alice {
			t.Fatalf("with a refreshed envelope: %v, %v", me, err)
		}
	})

	t.Run("NOT_FOUND and FORBIDDEN fail closed", func(t *testing.T) {
		bob := g.client(t, "bob@example.com", nil)
		f := goFollow(t, ctx, bob, notes)
		f.until(t, ctx, "closed", func(f *goFollower) bool { return f.state() == client.Closed })
		if _, err := f.s.State(); err == nil || err.Code != client.NotFound || len(f.seqs) != 0 {
			t.Fatalf("bob following alice's room: %v, %d entries", err, len(f.seqs))
		}
		turn, err := a.Submit(ctx, team, "A turn bob may not cancel", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec := &recording{}
		bobRec := g.client(t, "bob@example.com", with(rec))
		_, _, err = bobRec.Cancel(ctx, turn.Id, "")
		var typed *client.Error
		if !errors.As(err, &typed) || typed.Code != client.Forbidden || typed.Retryable() {
			t.Fatalf("bob cancelling alice's turn: %v, want a typed FORBIDDEN", err)
		}
		if got := rec.answered(); fmt.Sprint(got) != "[FORBIDDEN]" {
			t.Fatalf("answers %v: FORBIDDEN must be sent once", got)
		}
	})

	t.Run("a mutation without a key is sent once", func(t *testing.T) {
		rec := &recording{lose: func(body string) bool { return strings.Contains(body, "createConversation") }}
		c := g.client(t, alice, with(rec))
		if _, err := c.CreateConversation(ctx, "never twice", client.ConversationKindPrivate); client.CodeOf(err) != client.Network || rec.requests() != 1 {
			t.Fatalf("%v after %d requests", err, rec.requests())
		}
	})

	t.Run("the turn view: tools, citations, steer, cancel, the lane", func(t *testing.T) {
		f := goFollow(t, ctx, a, team)
		turn, err := a.Submit(ctx, team, "When is the launch?", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v := f.ended(t, ctx, turn.Id)
		if v.State != client.TurnStateCompleted || v.Terminal.Reason != client.TerminalReasonCompleted || len(v.Tools) == 0 || v.Tools[0].Status != "ok" || len(v.Citations) == 0 || !v.Answered || v.Author != "Alice" {
			t.Fatalf("turn view %+v", v)
		}
		for _, cite := range v.Citations {
			if !strings.HasPrefix(cite.Id, turn.Id+"/") || !strings.Contains(v.Answer, "["+cite.Ref+"]") {
				t.Fatalf("citation %+v", cite)
			}
		}

		p := goFollow(t, ctx, a, notes)
		steered, err := a.Submit(ctx, notes, "Tell me about the launch, at length?", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		second, err := a.Submit(ctx, notes, "and then this", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.until(t, ctx, "the second turn waits behind the first", func(f *goFollower) bool {
			s := f.fold.Turn(second.Id)
			return s != nil && s.State == client.TurnStateQueued && s.QueuePosition == 1
		})
		p.until(t, ctx, "the first turn runs", func(f *goFollower) bool {
			s := f.fold.Turn(steered.Id)
			return s != nil && s.State == client.TurnStateRunning
		})
		cmd := client.NewID()
		if _, _, err := a.Steer(ctx, steered.Id, "mention the weather", cmd); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Steer(ctx, steered.Id, "mention the weather", cmd); err != nil {
			t.Fatalf("a retried steer: %v", err)
		}
		sv := p.ended(t, ctx, steered.Id)
		if len(sv.Steers) != 1 || sv.Steers[0].CommandID != cmd || sv.Steers[0].State != client.CommandStateDelivered || !strings.Contains(sv.Answer, "mention the weather") {
			t.Fatalf("steered turn %+v", sv)
		}
		p.until(t, ctx, "the second answer streams", func(f *goFollower) bool { s := f.fold.Turn(second.Id); return s != nil && s.Answer != "" })
		stop := client.NewID()
		if _, _, err := a.Cancel(ctx, second.Id, stop); err != nil {
			t.Fatal(err)
		}
		// A retry of the same command converges on it (the run's owner
		// carries the cancel out; the turn may still be RUNNING here).
		cmd2, again, err := a.Cancel(ctx, second.Id, stop)
		if err != nil || cmd2 != stop || again.Id != second.Id {
			t.Fatalf("a retried cancel: %v, %v", again, err)
		}
		cv := p.ended(t, ctx, second.Id)
		if cv.State != client.TurnStateCancelled || cv.Terminal.Reason != client.TerminalReasonCancelledByMember {
			t.Fatalf("cancelled turn %+v", cv)
		}
	})

	t.Run("a steer in the answer's last step replaces its draft", func(t *testing.T) {
		// A room of its own: its lane is empty, so the turn runs at once.
		room, err := a.CreateConversation(ctx, "Drafts "+client.NewID(), client.ConversationKindPrivate)
		if err != nil {
			t.Fatal(err)
		}
		f := goFollow(t, ctx, a, room.Id)
		turn, err := a.Submit(ctx, room.Id, "Tell me about the launch, at length?", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The steer comes once the answer streams, after the tool round:
		// the run takes it at the end of its last step, discards that
		// draft and writes the answer again.
		f.until(t, ctx, "the answer streams", func(f *goFollower) bool { v := f.fold.Turn(turn.Id); return v != nil && v.Answer != "" })
		if _, _, err := a.Steer(ctx, turn.Id, "keep it short", client.NewID()); err != nil {
			t.Fatal(err)
		}
		v := f.ended(t, ctx, turn.Id)
		server, err := a.Turn(ctx, turn.Id)
		if err != nil {
			t.Fatal(err)
		}
		if server.Answer == nil || v.Answer != *server.Answer || !strings.Contains(v.Answer, "keep it short") {
			t.Fatalf("the view's answer %q, the server's %v", v.Answer, server.Answer)
		}
		// Replayed entry by entry through a fold, the journal never shows
		// the discarded draft joined to the new one: from the delivery on,
		// the answer is always a start of the final one.
		all, err := a.Journal(ctx, room.Id, 0)
		if err != nil {
			t.Fatal(err)
		}
		replay := client.NewFold(0)
		delivered, discarded := false, false
		for _, e := range all {
			replay.Apply(e)
			if e.TurnId == nil || *e.TurnId != turn.Id {
				continue
			}
			if e.Kind == client.JournalKindSteerDelivered {
				delivered = true
			}
			if e.Kind == client.JournalKindAnswerDelta && !delivered {
				discarded = true // text streamed before the delivery: a draft
			}
			if answer := replay.Turn(turn.Id).Answer; delivered && !strings.HasPrefix(*server.Answer, answer) {
				t.Fatalf("after the steer's delivery, at position %d, the fold shows %q, which is not how %q starts", e.Seq, answer, *server.Answer)
			}
		}
		if !delivered || !discarded {
			t.Fatalf("the steer was delivered %v, after a draft streamed %v: want both", delivered, discarded)
		}
	})

	t.Run("a member added later reads earlier turns withheld, and the owner is told how many", func(t *testing.T) {
		bob := g.client(t, "bob@example.com", nil)
		quiet, err := a.CreateConversation(ctx, "Nothing withheld "+client.NewID(), client.ConversationKindShared)
		if err != nil {
			t.Fatal(err)
		}
		added, err := a.AddRoomMember(ctx, quiet.Id, "bob@example.com")
		if err != nil || added.Room.Id != quiet.Id || !hasMember(added.Room, "bob@example.com") || added.WithheldTurns != 0 {
			t.Fatalf("adding bob to a room with no history: %+v, %v; want the room with bob, 0 withheld", added, err)
		}

		room, err := a.CreateConversation(ctx, "Planning "+client.NewID(), client.ConversationKindShared)
		if err != nil {
			t.Fatal(err)
		}
		live := goFollow(t, ctx, a, room.Id)
		turn, err := a.Submit(ctx, room.Id, "What are the engineering bands for 2027?", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v := live.ended(t, ctx, turn.Id); v.State != client.TurnStateCompleted || v.Withheld || !strings.Contains(v.Answer, "95,000") {
			t.Fatalf("alice's turn, alone in the room: %+v", v)
		}
		drewOn(t, ctx, g.w.DB, room.Id, turn.Id, "Compensation bands 2027")
		added, err = a.AddRoomMember(ctx, room.Id, "bob@example.com")
		if err != nil || !hasMember(added.Room, "bob@example.com") || added.WithheldTurns != 1 {
			t.Fatalf("adding bob after a turn on the bands: %+v, %v; want 1 earlier turn withheld", added, err)
		}
		// Bob's fold replays the room from position 0: the turn keeps its
		// place and reads withheld, the notice its text.
		v := goFollow(t, ctx, bob, room.Id).ended(t, ctx, turn.Id)
		withheldView(t, ctx, bob, v)
		// Alice, who may read the bands, still reads the answer.
		if v := goFollow(t, ctx, a, room.Id).ended(t, ctx, turn.Id); v.Withheld || !strings.Contains(v.Answer, "95,000") || v.Terminal.Reason != client.TerminalReasonCompleted {
			t.Fatalf("alice's replay after bob joined: %+v", v)
		}
	})

	t.Run("an answer withheld at publication folds to the notice, live and replayed", func(t *testing.T) {
		carol := g.client(t, "carol@example.com", nil)
		if _, err := carol.Me(ctx); err != nil {
			t.Fatal(err)
		}
		room, err := a.CreateConversation(ctx, "Launch "+client.NewID(), client.ConversationKindShared)
		if err != nil {
			t.Fatal(err)
		}
		live := goFollow(t, ctx, a, room.Id)
		live.until(t, ctx, "live", func(f *goFollower) bool { return f.state() == client.Live })
		id := live.midAnswer(t, ctx, a, room.Id, "When is the launch?")
		// Carol, who may not read the launch plan, joins while the answer
		// streams: the streaming turn, which read it, reads withheld to
		// her already, and publication withholds it from the room.
		added, err := a.AddRoomMember(ctx, room.Id, "carol@example.com")
		if err != nil || added.WithheldTurns != 1 {
			t.Fatalf("adding carol mid-answer: %+v, %v", added, err)
		}
		withheldView(t, ctx, a, live.ended(t, ctx, id))
		withheldView(t, ctx, a, goFollow(t, ctx, a, room.Id).ended(t, ctx, id))
		withheldView(t, ctx, carol, goFollow(t, ctx, carol, room.Id).ended(t, ctx, id))
	})

	t.Run("a turn's replay", func(t *testing.T) {
		f := goFollow(t, ctx, a, team)
		turn, err := a.Submit(ctx, team, "When is the launch?", client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v := f.ended(t, ctx, turn.Id)
		calls, err := a.Replay(ctx, turn.Id, 50)
		if err != nil || len(calls) < 2 {
			t.Fatalf("replay: %d calls, %v", len(calls), err)
		}
		last := calls[len(calls)-1]
		if last.Step != len(calls) || last.Text != v.Answer || len(calls[0].ToolCalls) == 0 {
			t.Fatalf("replay: last call %+v, answer %q", last, v.Answer)
		}
	})
}

func hasMember(room *client.ConversationFields, email string) bool {
	for _, m := range room.Members {
		if m.Member.Email == email {
			return true
		}
	}
	return false
}

// drewOn records that turn drew on the document titled title, as the
// server records what a turn's text derives from.
func drewOn(t *testing.T, ctx context.Context, db *sql.DB, room, turn, title string) {
	t.Helper()
	res, err := db.ExecContext(ctx, `INSERT INTO turn_evidence (id, conversation_id, turn_id, document_id)
  SELECT gen_random_uuid(), $1, $2, id FROM documents WHERE title = $3 ON CONFLICT DO NOTHING`, room, turn, title)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var recorded bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM turn_evidence WHERE turn_id = $1)`, turn).Scan(&recorded); err != nil || !recorded {
			t.Fatalf("no evidence of %q recorded for turn %s (%v)", title, turn, err)
		}
	}
}

// withheldView checks a folded turn reads withheld: completed, its text
// the notice (none of the streamed text), AUDIENCE_WITHHELD, as the
// server's turn reads to the same viewer.
func withheldView(t *testing.T, ctx context.Context, viewer *client.Client, v client.TurnView) {
	t.Helper()
	if v.State != client.TurnStateCompleted || v.Terminal.Reason != client.TerminalReasonAudienceWithheld || !v.Withheld ||
		!v.Answered || v.Answer != outcome.WithheldAnswer || len(v.Artifacts) != 0 {
		t.Fatalf("the turn folds to %+v; want it withheld, its answer the notice", v)
	}
	server, err := viewer.Turn(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if server.Answer == nil || *server.Answer != v.Answer || server.Terminal.Reason != v.Terminal.Reason {
		t.Fatalf("the fold's answer %q (%s); the server's %v (%+v)", v.Answer, v.Terminal.Reason, server.Answer, server.Terminal)
	}
}

// TestGoClientJournalBodies: the Go client reads a real room's journal
// — paged by query and streamed over the WebSocket — with each entry's
// body decoded as the generated type of its kind, so a type switch tells
// the kinds apart where nil checks on the deprecated fields did; the
// steered turn's instruction arrives as its own type, delivered or
// rejected.
func TestGoClientJournalBodies(t *testing.T) {
	t.Parallel()
	g := newGoWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := g.client(t, alice, nil)
	team := roomOf(t, ctx, a, "Team room")
	f := goFollow(t, ctx, a, team)
	turn := f.midAnswer(t, ctx, a, team, "When is the launch?")
	if _, _, err := a.Steer(ctx, turn, "shorter, please", ""); err != nil {
		t.Fatal(err)
	}
	f.ended(t, ctx, turn)

	// kindOf is the kind a body's type says, by a type switch.
	kindOf := func(b client.JournalPayloadFields) client.JournalKind {
		switch b := b.(type) {
		case *client.JournalPayloadFieldsTurnAccepted:
			if b.AuthorName != "" {
				return client.JournalKindTurnAccepted
			}
		case *client.JournalPayloadFieldsTurnStart:
			if b.Attempt >= 1 {
				return client.JournalKindTurnStarted
			}
		case *client.JournalPayloadFieldsAnswerDelta:
			if b.TurnId == turn || b.Text != "" {
				return client.JournalKindAnswerDelta
			}
		case *client.JournalPayloadFieldsToolRequested:
			if b.Name != "" {
				return client.JournalKindToolRequested
			}
		case *client.JournalPayloadFieldsToolCompleted:
			if b.Status != "" {
				return client.JournalKindToolCompleted
			}
		case *client.JournalPayloadFieldsApprovalRequest:
			return client.JournalKindApprovalRequested
		case *client.JournalPayloadFieldsApprovalDecisionRecord:
			return client.JournalKindApprovalDecided
		case *client.JournalPayloadFieldsSteerDelivered:
			if b.Text == "shorter, please" {
				return client.JournalKindSteerDelivered
			}
		case *client.JournalPayloadFieldsSteerRejected:
			if b.Text == "shorter, please" && b.Terminal != nil {
				return client.JournalKindSteerRejected
			}
		case *client.JournalPayloadFieldsCheckpointRecord:
			return client.JournalKindCheckpoint
		case *client.JournalPayloadFieldsCompactionRecord:
			return client.JournalKindCompaction
		case *client.JournalPayloadFieldsTurnAnswer:
			if b.Text != "" {
				return client.JournalKindTurnAnswer
			}
		case *client.JournalPayloadFieldsTurnTerminal:
			if b.Outcome != "" {
				return client.JournalKindTurnTerminal
			}
		case *client.JournalPayloadFieldsMemberJoined:
			return client.JournalKindMemberJoined
		case *client.JournalPayloadFieldsMemberLeft:
			return client.JournalKindMemberLeft
		}
		return ""
	}
	paged, err := a.Journal(ctx, team, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds := map[client.JournalKind]int{}
	for _, e := range paged {
		if got := kindOf(e.Body); got != e.Kind {
			t.Fatalf("entry %d (%s) has a body of type %T (%+v)", e.Seq, e.Kind, e.Body, e.Body)
		}
		if e.TurnId != nil && *e.TurnId == turn {
			kinds[e.Kind]++
		}
	}
	for _, k := range []client.JournalKind{client.JournalKindTurnAccepted, client.JournalKindTurnStarted, client.JournalKindAnswerDelta,
		client.JournalKindTurnAnswer, client.JournalKindTurnTerminal} {
		if kinds[k] == 0 {
			t.Fatalf("the turn's entries %v have no %s", kinds, k)
		}
	}
	if kinds[client.JournalKindSteerDelivered]+kinds[client.JournalKindSteerRejected] != 1 {
		t.Fatalf("the turn's entries %v: want its steer delivered or rejected", kinds)
	}
	// The stream decoded the same bodies, entry by entry.
	if len(f.bodies) == 0 {
		t.Fatal("the stream delivered nothing")
	}
	for _, e := range f.bodies {
		if got := kindOf(e.Body); got != e.Kind {
			t.Fatalf("streamed entry %d (%s) has a body of type %T (%+v)", e.Seq, e.Kind, e.Body, e.Body)
		}
	}
}
