package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/pgembed"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestDatabaseOutageIsUnavailable: several clients submit messages, run
// queries and mutations (conversation, conversations, journal, turn,
// documents, resumeTurn, createConversation, the first request of a new
// member, a tokens replay over SSE) and follow a room's journal over
// graphql-transport-ws and over SSE, while the server's Postgres is stopped
// (SIGINT, a fast shutdown), started again on the same data and port, and
// then made to refuse and drop the server's connections (too many
// connections for its role, 53300; pg_terminate_backend, 57P01). Every
// error any client sees is UNAVAILABLE and retryable; every submission
// that failed, re-sent with its idempotency key and text once the database
// is back, succeeds, and each key has exactly one turn; each subscription,
// resumed after its last position whenever it ends with its error, sees
// every journal position once, in order.
func TestDatabaseOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setupOutage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	team := servertest.Rooms(t, b.alice)["Team room"]
	first, err := submitOutage(ctx, b.alice, team.ID, "outage-first", "outage message outage-first")
	if err != nil {
		t.Fatal(err)
	}
	var bobs struct {
		CreateConversation struct{ ID string } `json:"createConversation"`
	}
	if err := b.bob.Do(ctx, `mutation { createConversation(input: {title: "Bob's outage room", kind: SHARED}) { id } }`, nil, &bobs); err != nil {
		t.Fatal(err)
	}
	o := &outageLog{phase: "up"}
	// Each submitter has a room of its own: two concurrent submissions to
	// one room can deadlock with the runner's lane claim (40P01, an
	// INTERNAL error that has nothing to do with the database being
	// away), which is not what this test is about.
	submitters := []*submitter{
		{name: "alice-team", c: b.alice, room: team.ID},
		{name: "bob-room", c: b.bob, room: bobs.CreateConversation.ID},
		{name: "alice-notes", c: b.alice, room: servertest.Rooms(t, b.alice)["Alice's notes"].ID},
		{name: "bob-notes", c: b.bob, room: servertest.Rooms(t, b.bob)["Bob's notes"].ID},
	}
	var newcomers atomic.Int64
	readers := []*reader{
		{name: "conversation", c: b.alice, query: `query($c: ID!) { conversation(id: $c) { id head audienceVersion owner { email } activeTurn { id state } members { role member { email } } } }`, vars: map[string]any{"c": team.ID}},
		{name: "journal", c: b.bob, query: `query($c: ID!) { journal(conversationId: $c, first: 20) { head hasMore entries { seq kind turnId text } } }`, vars: map[string]any{"c": team.ID}},
		{name: "conversations", c: b.bob, query: `{ conversations(first: 5) { edges { cursor node { id head } } pageInfo { hasNextPage endCursor } } }`},
		{name: "turn", c: b.alice, query: `query($id: ID!) { turn(id: $id) { id state answer author { email } usage { inputTokens outputTokens } approvals { id state } citations { id source } artifacts { artifactId name } } }`, vars: map[string]any{"id": first}},
		{name: "documents", c: b.alice, query: `{ documents(first: 5, query: "launch") { id title digest } }`},
		{name: "resumeTurn", c: b.alice, query: `mutation($id: ID!) { resumeTurn(input: {turnId: $id}) { id state } }`, vars: map[string]any{"id": first}},
		{name: "tokens", c: b.bob, do: func(ctx context.Context, c *gqlclient.Client) error { return replayTokens(ctx, c, first) }},
		{name: "createConversation", c: b.bob, query: `mutation { createConversation(input: {title: "outage room", kind: PRIVATE}) { id } }`},
		// A member the server has not met: resolving the identity is a
		// write of its own.
		{name: "newcomer", query: `{ me { id email } }`, fresh: func() *gqlclient.Client {
			// A failure to mint shows as the client's UNAUTHENTICATED.
			tok, _ := server.MintDev(b.h.Signer, fmt.Sprintf("newcomer%d@example.com", newcomers.Add(1)), time.Hour)
			return b.h.ClientWithToken(tok)
		}},
	}
	followers := []*follower{
		{name: "subscription", last: team.Head, open: b.websocket(b.alice, team.ID)},
		{name: "subscription-sse", last: team.Head, open: sse(b.bob, team.ID)},
	}
	var clients []string
	for _, s := range submitters {
		clients = append(clients, s.name)
	}
	for _, r := range readers {
		clients = append(clients, r.name)
	}
	requesters := slices.Clone(clients) // clients with a request always in flight
	for _, f := range followers {
		clients = append(clients, f.name)
	}
	received := func() (n []int) {
		for _, f := range followers {
			n = append(n, f.received())
		}
		return n
	}
	moved := func(since []int) bool {
		for i, f := range followers {
			if f.received() <= since[i] {
				return false
			}
		}
		return true
	}

	stop, stopFollowing := make(chan struct{}), make(chan struct{})
	var wg, following sync.WaitGroup
	for _, s := range submitters {
		wg.Go(func() { s.run(stop, o) })
	}
	for _, r := range readers {
		wg.Go(func() { r.run(stop, o) })
	}
	for _, f := range followers {
		following.Go(func() { f.run(stopFollowing, o) })
	}
	stopTraffic := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopTraffic()
	stopFollowers := sync.OnceFunc(func() { close(stopFollowing); following.Wait() })
	defer stopFollowers()

	// Each client is served before anything goes wrong.
	o.waitUntil(t, ctx, 10*time.Second, "every client served while Postgres is up", func() bool {
		return o.everyClient(clients, "up", 2, 0)
	})

	// Stop Postgres under the traffic and keep sending until every client,
	// the subscriptions included, has seen it fail (a subscription notices
	// on the hub's next poll, within 2 s).
	o.setPhase("down")
	if err := b.pg.stop(); err != nil {
		t.Fatal(err)
	}
	o.waitUntil(t, ctx, 10*time.Second, "every client failing while Postgres is down", func() bool {
		return o.everyClient(clients, "down", 0, 2)
	})

	// Start it again on the same data and port; every client recovers,
	// the subscriptions resume after their last position.
	o.setPhase("restarting")
	if err := b.pg.start(ctx); err != nil {
		t.Fatal(err)
	}
	o.setPhase("back")
	seen := received()
	o.waitUntil(t, ctx, 15*time.Second, "every client served again after the restart", func() bool {
		return o.everyClient(clients, "back", 2, 0) && moved(seen)
	})

	// The server's role may open no connection (53300), and every one it
	// holds is terminated (57P01): what it has in flight fails, and so
	// does every new connection it tries.
	o.setPhase("refused")
	b.admin(t, ctx, `ALTER ROLE `+outageRole+` CONNECTION LIMIT 0`)
	b.admin(t, ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, outageRole)
	o.waitUntil(t, ctx, 10*time.Second, "every request failing while the server's connections are refused", func() bool {
		return o.everyClient(requesters, "refused", 0, 2)
	})
	b.admin(t, ctx, `ALTER ROLE `+outageRole+` CONNECTION LIMIT -1`)
	o.setPhase("allowed")
	seen = received()
	o.waitUntil(t, ctx, 15*time.Second, "every client served again once connections are allowed", func() bool {
		return o.everyClient(clients, "allowed", 2, 0) && moved(seen)
	})
	stopTraffic()

	// Re-sending every failed submission with its key and text succeeds,
	// and every key has exactly one turn.
	o.setPhase("re-send")
	accepted := map[string]string{"outage-first": first} // key -> turn id
	var failed []pendingSubmit
	for _, s := range submitters {
		for k, id := range s.accepted {
			accepted[k] = id
		}
		failed = append(failed, s.failed...)
	}
	if len(failed) == 0 {
		t.Fatal("no submission failed: the outage was not under traffic")
	}
	for _, p := range failed {
		id, err := submitOutage(ctx, p.c, p.room, p.key, p.text)
		o.record("re-send", "submitMessage", err)
		if err != nil {
			t.Fatalf("re-sending %s: %v", p.key, err)
		}
		accepted[p.key] = id
	}
	stored := turnsByKey(t, ctx, b.db)
	for key, id := range accepted {
		if ids := stored[key]; len(ids) != 1 || ids[0] != id {
			t.Errorf("key %s: the client got turn %s, the table holds %q", key, id, ids)
		}
	}
	if len(stored) != len(accepted) {
		t.Errorf("%d keys have turns, the clients sent %d", len(stored), len(accepted))
	}

	// Each subscription, resumed after each failure, has every position of
	// the room up to its head, once and in order.
	var head struct {
		Conversation struct{ Head int64 } `json:"conversation"`
	}
	if err := b.alice.Do(ctx, `query($c: ID!) { conversation(id: $c) { head } }`, map[string]any{"c": team.ID}, &head); err != nil {
		t.Fatal(err)
	}
	for _, f := range followers {
		o.waitUntil(t, ctx, 15*time.Second, fmt.Sprintf("%s reaching position %d", f.name, head.Conversation.Head), func() bool {
			return f.position() >= head.Conversation.Head
		})
	}
	stopFollowers()

	// Every error any client saw is UNAVAILABLE and retryable.
	var bad []string
	for _, line := range o.distinct() {
		t.Log("client saw: " + line.String())
		if line.code != "UNAVAILABLE" || line.retryable != "true" {
			bad = append(bad, line.String())
		}
	}
	for _, c := range b.causes.distinct() {
		t.Log("server logged: " + c)
	}
	if len(bad) > 0 {
		t.Errorf("errors that are not UNAVAILABLE and retryable:\n%s", strings.Join(bad, "\n"))
	}
	for _, f := range followers {
		if faults := f.faultList(); len(faults) > 0 {
			t.Errorf("%s:\n%s", f.name, strings.Join(faults, "\n"))
		}
		t.Logf("%s: %d entries, resumed %d times", f.name, f.received(), f.resumes())
	}
	t.Logf("%d submissions accepted at once, %d re-sent after failing", len(accepted)-len(failed), len(failed))
}

// turnsByKey is the turns of the test's idempotency keys, by key.
func turnsByKey(t *testing.T, ctx context.Context, db *sql.DB) map[string][]string {
	t.Helper()
	rows, err := db.QueryContext(ctx, `SELECT idempotency_key, id FROM turns WHERE idempotency_key LIKE 'outage-%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var key, id string
		if err := rows.Scan(&key, &id); err != nil {
			t.Fatal(err)
		}
		out[key] = append(out[key], id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// outageRole is the ordinary role the server connects as, as a production
// deployment would: its connection limit applies to it (a superuser's
// does not).
const outageRole = "turngate_app"

type outageBundle struct {
	h          *servertest.Harness
	pg         *restartable
	db         *sql.DB // the server's database, as the superuser
	alice, bob *gqlclient.Client
	causes     *causeLog
}

func setupOutage(t *testing.T) *outageBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Not t.TempDir: when the tests run as root, Postgres runs as the OS
	// user postgres, who must be able to enter every parent folder.
	dir, err := os.MkdirTemp("", "turngate-outage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg := &restartable{dir: dir}
	if err := pg.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pg.stop(); err != nil {
			t.Error(err)
		}
	})
	super, err := sql.Open("postgres", pg.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close()
	for _, q := range []string{
		`CREATE ROLE ` + outageRole + ` LOGIN`,
		`CREATE DATABASE turngate OWNER ` + outageRole,
	} {
		if _, err := super.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("postgres", pg.url("turngate"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	u, err := url.Parse(pg.url("turngate"))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(outageRole)

	causes := &causeLog{seen: map[string]int{}}
	h := servertest.StartLog(t, server.Config{
		Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"), DatabaseURL: u.String(),
		IdentityHeader: "X-Turngate-Identity", EnvelopeIssuer: server.DevIssuer, EnvelopeAud: server.DevAudience,
		Demo: true, MaxTextLen: 2000, LeaseTTL: 30 * time.Second, Replica: "outage",
		Limits: unlimitedCommands, // the clients submit faster than people
	}, slog.New(causes))
	return &outageBundle{h: h, pg: pg, db: db, alice: h.Client(t, alice), bob: h.Client(t, bob), causes: causes}
}

// admin runs a statement as the superuser.
func (b *outageBundle) admin(t *testing.T, ctx context.Context, query string, args ...any) {
	t.Helper()
	if _, err := b.db.ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// restartable is a private Postgres that is stopped and started again on
// the same data folder and port.
type restartable struct {
	dir  string
	mu   sync.Mutex
	pg   *pgembed.Postgres // nil while stopped
	port int
}

func (r *restartable) start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pg, err := pgembed.Start(ctx, pgembed.Options{Dir: r.dir, Port: r.port})
	if err != nil {
		return err
	}
	r.pg, r.port = pg, pg.Port()
	return nil
}

// stop stops the server (SIGINT, a fast shutdown: it disconnects every
// client). Safe to call while stopped.
func (r *restartable) stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pg == nil {
		return nil
	}
	err := r.pg.Stop()
	r.pg = nil
	return err
}

func (r *restartable) url(db string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pg.URL(db)
}

// outageLog records what every client saw, by phase of the test.
type outageLog struct {
	mu       sync.Mutex
	phase    string
	errs     map[seenError]int
	ok, fail map[[2]string]int // {client, phase} -> count
}

// seenError is one distinct error a client saw.
type seenError struct{ phase, op, code, retryable, message string }

func (e seenError) String() string {
	return fmt.Sprintf("[%s] %s: code=%q retryable=%s %q", e.phase, e.op, e.code, e.retryable, e.message)
}

func (o *outageLog) setPhase(p string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.phase = p
}

// record notes the outcome of one request of client, in the current phase.
func (o *outageLog) record(client, op string, err error) {
	var errs []gqlclient.Error
	var re *gqlclient.ResponseError
	switch {
	case err == nil:
	case errors.As(err, &re):
		errs = re.Errors
	default:
		// Not a GraphQL error at all: a transport failure, a response
		// that is not JSON, a request the server never answered.
		errs = []gqlclient.Error{{Message: "client: " + err.Error()}}
	}
	o.recordErrors(client, op, errs)
}

func (o *outageLog) recordErrors(client, op string, errs []gqlclient.Error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = map[seenError]int{}
		o.ok = map[[2]string]int{}
		o.fail = map[[2]string]int{}
	}
	if len(errs) == 0 {
		o.ok[[2]string{client, o.phase}]++
		return
	}
	o.fail[[2]string{client, o.phase}]++
	for _, e := range errs {
		o.errs[seenError{o.phase, op, e.Code(), fmt.Sprint(e.Extensions["retryable"]), e.Message}]++
	}
}

// everyClient reports whether each client has had at least ok successes
// and fail failures in phase.
func (o *outageLog) everyClient(clients []string, phase string, ok, fail int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range clients {
		if o.ok[[2]string{c, phase}] < ok || o.fail[[2]string{c, phase}] < fail {
			return false
		}
	}
	return true
}

// report is every client's successes and failures by phase, and the
// distinct errors seen.
func (o *outageLog) report() string {
	o.mu.Lock()
	var lines []string
	for k, n := range o.ok {
		lines = append(lines, fmt.Sprintf("%s [%s]: %d served", k[0], k[1], n))
	}
	for k, n := range o.fail {
		lines = append(lines, fmt.Sprintf("%s [%s]: %d failed", k[0], k[1], n))
	}
	o.mu.Unlock()
	sort.Strings(lines)
	for _, e := range o.distinct() {
		lines = append(lines, e.String())
	}
	return strings.Join(lines, "\n")
}

type countedError struct {
	seenError
	n int
}

func (c countedError) String() string { return fmt.Sprintf("%s ×%d", c.seenError, c.n) }

func (o *outageLog) distinct() []countedError {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []countedError
	for e, n := range o.errs {
		out = append(out, countedError{e, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

const outageSubmit = `mutation($c: ID!, $t: String!, $k: String!) { submitMessage(input: {conversationId: $c, text: $t, idempotencyKey: $k}) { id idempotencyKey input } }`

func submitOutage(ctx context.Context, c *gqlclient.Client, room, key, text string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out struct {
		SubmitMessage struct{ ID, IdempotencyKey, Input string } `json:"submitMessage"`
	}
	if err := c.Do(ctx, outageSubmit, map[string]any{"c": room, "t": text, "k": key}, &out); err != nil {
		return "", err
	}
	if out.SubmitMessage.IdempotencyKey != key || out.SubmitMessage.Input != text {
		return "", fmt.Errorf("submitting %s returned turn %+v", key, out.SubmitMessage)
	}
	return out.SubmitMessage.ID, nil
}

// submitter submits messages to one room, each with a key of its own,
// and remembers which were accepted and which failed.
type submitter struct {
	name     string
	c        *gqlclient.Client
	room     string
	accepted map[string]string // key -> turn id
	failed   []pendingSubmit
}

type pendingSubmit struct {
	c               *gqlclient.Client
	room, key, text string
}

func (s *submitter) run(stop <-chan struct{}, o *outageLog) {
	s.accepted = map[string]string{}
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for i := 0; ; i++ {
		key := fmt.Sprintf("outage-%s-%d", s.name, i)
		text := "outage message " + key
		// Requests are not cancelled when the traffic stops: each one's
		// outcome is the server's.
		id, err := submitOutage(context.Background(), s.c, s.room, key, text)
		o.record(s.name, "submitMessage", err)
		if err != nil {
			s.failed = append(s.failed, pendingSubmit{s.c, s.room, key, text})
		} else {
			s.accepted[key] = id
		}
		select {
		case <-stop:
			return
		case <-pace.C:
		}
	}
}

// reader runs one query or mutation in a loop.
type reader struct {
	name, query string
	c           *gqlclient.Client
	vars        map[string]any
	// fresh, when set, gives the client of each request instead of c.
	fresh func() *gqlclient.Client
	// do, when set, is the request instead of query.
	do func(ctx context.Context, c *gqlclient.Client) error
}

func (r *reader) run(stop <-chan struct{}, o *outageLog) {
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for {
		c := r.c
		if r.fresh != nil {
			c = r.fresh()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		if r.do != nil {
			err = r.do(ctx, c)
		} else {
			err = c.Do(ctx, r.query, r.vars, nil)
		}
		cancel()
		o.record(r.name, r.name, err)
		select {
		case <-stop:
			return
		case <-pace.C:
		}
	}
}

// replayTokens streams the answer of a turn that has ended over SSE, to
// its end.
func replayTokens(ctx context.Context, c *gqlclient.Client, turn string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resps, err := c.SSE(ctx, gqlclient.Request{Query: `subscription($t: ID!) { tokens(turnId: $t) { seq text } }`, Variables: map[string]any{"t": turn}})
	if err != nil {
		return err
	}
	deltas := 0
	for r := range resps {
		if err := r.Err(); err != nil {
			return err
		}
		deltas++
	}
	if deltas == 0 {
		return errors.New("the tokens stream ended with neither text nor an error")
	}
	return nil
}

// follower follows a room's journal, resuming after the last position it
// saw whenever its subscription ends.
type follower struct {
	name string
	open opener

	mu     sync.Mutex
	last   int64 // the last position received
	n      int   // entries received
	subs   int   // subscriptions started
	faults []string
}

// opener connects a follower; its subscribe starts one subscription after
// a position, until ctx ends. close ends the connection.
type opener func(ctx context.Context) (subscribe func(ctx context.Context, id string, after int64) (<-chan gqlclient.Message, error), close func(), err error)

// websocket opens one graphql-transport-ws connection for c, on which
// every subscription of the follower runs.
func (b *outageBundle) websocket(c *gqlclient.Client, room string) opener {
	return func(ctx context.Context) (func(context.Context, string, int64) (<-chan gqlclient.Message, error), func(), error) {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		conn, err := gqlclient.Dial(dctx, c.URL, c.Header, nil)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, id string, after int64) (<-chan gqlclient.Message, error) {
			return conn.Subscribe(ctx, id, gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room, "after": after}})
		}, conn.Close, nil
	}
}

// sse runs each subscription of the follower as a Server-Sent Events
// request of its own. Its messages are "next" ones; the stream's end is
// "complete".
func sse(c *gqlclient.Client, room string) opener {
	return func(context.Context) (func(context.Context, string, int64) (<-chan gqlclient.Message, error), func(), error) {
		return func(ctx context.Context, _ string, after int64) (<-chan gqlclient.Message, error) {
			resps, err := c.SSE(ctx, gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room, "after": after}})
			if err != nil {
				return nil, err
			}
			msgs := make(chan gqlclient.Message)
			go func() {
				defer close(msgs)
				for r := range resps {
					payload, err := json.Marshal(r)
					if err != nil {
						panic(err)
					}
					select {
					case msgs <- gqlclient.Message{Type: "next", Payload: payload}:
					case <-ctx.Done():
						return
					}
				}
				select {
				case msgs <- gqlclient.Message{Type: "complete"}:
				case <-ctx.Done():
				}
			}()
			return msgs, nil
		}, func() {}, nil
	}
}

func (f *follower) received() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *follower) position() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *follower) resumes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subs - 1
}

func (f *follower) faultList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.faults)
}

func (f *follower) fault(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fmt.Sprintf(format, args...))
}

func (f *follower) run(stop <-chan struct{}, o *outageLog) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	subscribe, closeConn, err := f.open(ctx)
	if err != nil {
		if ctx.Err() == nil {
			o.record(f.name, "subscription", err)
		}
		return
	}
	defer closeConn()
	backoff := time.NewTicker(50 * time.Millisecond)
	defer backoff.Stop()
	for {
		f.mu.Lock()
		f.subs++
		id, after := fmt.Sprintf("s%d", f.subs), f.last
		f.mu.Unlock()
		sctx, cancelSub := context.WithCancel(ctx)
		msgs, err := subscribe(sctx, id, after)
		if err != nil {
			cancelSub()
			if ctx.Err() == nil {
				o.record(f.name, "subscription", err)
			}
			return
		}
		resume := f.follow(ctx, o, msgs)
		cancelSub()
		if !resume {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-backoff.C:
		}
	}
}

// follow reads one subscription until it ends. It reports whether to
// resume: the subscription ended with an error the client may retry.
func (f *follower) follow(ctx context.Context, o *outageLog, msgs <-chan gqlclient.Message) bool {
	failed := false
	for {
		var m gqlclient.Message
		var ok bool
		select {
		case <-ctx.Done():
			return false
		case m, ok = <-msgs:
		}
		if !ok {
			if ctx.Err() == nil {
				f.fault("the connection ended")
			}
			return false
		}
		switch m.Type {
		case "next":
			var r struct {
				Data struct {
					Journal *servertest.WireEntry `json:"journal"`
				} `json:"data"`
				Errors []gqlclient.Error `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &r); err != nil {
				f.fault("undecodable message %s: %v", m.Payload, err)
				return false
			}
			if len(r.Errors) > 0 {
				o.recordErrors(f.name, "subscription", r.Errors)
				failed = true
				continue
			}
			f.mu.Lock()
			if r.Data.Journal.Seq != f.last+1 {
				f.faults = append(f.faults, fmt.Sprintf("received position %d after %d", r.Data.Journal.Seq, f.last))
			}
			f.last = r.Data.Journal.Seq
			f.n++
			f.mu.Unlock()
			o.recordErrors(f.name, "subscription", nil)
		case "error":
			var errs []gqlclient.Error
			if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) == 0 {
				errs = []gqlclient.Error{{Message: "client: undecodable error message " + string(m.Payload)}}
			}
			o.recordErrors(f.name, "subscription", errs)
			return true
		case "complete":
			if !failed {
				f.fault("the subscription completed without an error")
				return false
			}
			return true
		}
	}
}

// causeLog is the server's log: it keeps each distinct warning and
// error with its cause, to show what the clients' errors were.
type causeLog struct {
	mu   sync.Mutex
	seen map[string]int
}

func (c *causeLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (c *causeLog) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			line += ": " + a.Value.String()
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[line]++
	return nil
}

func (c *causeLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *causeLog) WithGroup(string) slog.Handler      { return c }

func (c *causeLog) distinct() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for line, n := range c.seen {
		out = append(out, fmt.Sprintf("%s ×%d", line, n))
	}
	sort.Strings(out)
	return out
}

// waitUntil polls cond until it holds, failing the test after d with
// what o has seen.
func (o *outageLog) waitUntil(t *testing.T, ctx context.Context, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; clients saw:\n%s", what, o.report())
		case <-tick.C:
		}
	}
}
