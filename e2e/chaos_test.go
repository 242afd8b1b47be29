package e2e

// The fault-injection harness. `make test` runs a short round; `make chaos`
// runs a long one (TURNGATE_CHAOS=long).

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

type chaosConfig struct {
	replicas, rooms, turns, submitters int
	ttl                                time.Duration
}

func chaosSettings() chaosConfig {
	if os.Getenv("TURNGATE_CHAOS") == "long" {
		return chaosConfig{replicas: 3, rooms: 10, turns: 400, submitters: 8, ttl: time.Second}
	}
	return chaosConfig{replicas: 3, rooms: 4, turns: 40, submitters: 4, ttl: time.Second}
}

// chaosCluster is the set of replica processes, which the chaos monkey
// kills, pauses and restarts.
type chaosCluster struct {
	t                *testing.T
	bin, db, dataDir string
	env              []string

	mu       sync.Mutex
	live     []*e2etest.Replica // nil while dead
	paused   []bool
	restarts int
}

func (c *chaosCluster) start(i int) {
	c.mu.Lock()
	c.restarts++
	name := fmt.Sprintf("chaos-%d-%d", i, c.restarts)
	c.mu.Unlock()
	r, err := e2etest.TryStartReplica(c.t, c.bin, name, c.db, c.dataDir, c.env...)
	if err != nil {
		c.t.Errorf("restarting replica %d: %v", i, err)
		return
	}
	c.mu.Lock()
	c.live[i] = r
	c.mu.Unlock()
}

// pick returns the base URL of a replica that is up and not paused.
func (c *chaosCluster) pick(rng *rand.Rand) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []string
	for i, r := range c.live {
		if r != nil && !c.paused[i] {
			up = append(up, r.Base)
		}
	}
	if len(up) == 0 {
		return ""
	}
	return up[rng.IntN(len(up))]
}

// TestChaos starts real replicas against one Postgres, drives turns across
// rooms from concurrent clients with retried submits and reconnecting
// streams, kills replicas with SIGKILL and pauses them with SIGSTOP for
// longer than the lease at random moments, restarts them, and then checks
// the journal: every accepted input has exactly one terminal; no turn ran
// two attempts at once; per-room FIFO held; no duplicate turn from retried
// submits; no journal gaps; every replayed stream is complete and
// duplicate-free.
func TestChaos(t *testing.T) {
	t.Parallel()
	cfg := chaosSettings()
	seed := uint64(time.Now().UnixNano())
	t.Logf("chaos seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	bin := e2etest.Binary(t)
	dbURL := dbtest.NewDB(t)
	dataDir, err := os.MkdirTemp("", "turngate-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	cl := &chaosCluster{t: t, bin: bin, db: dbURL, dataDir: dataDir,
		env:  append([]string{"TURNGATE_LEASE_TTL=" + cfg.ttl.String(), "TURNGATE_MODEL_PACE=10ms"}, servertest.UnlimitedCommandsEnv...),
		live: make([]*e2etest.Replica, cfg.replicas), paused: make([]bool, cfg.replicas)}
	cl.start(0) // seeds the demo alone
	for i := 1; i < cfg.replicas; i++ {
		cl.start(i)
	}
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Rooms shared by alice and bob.
	alicec := e2etest.ClientFor(t, bin, cl.live[0].Base, dataDir, alice)
	var roomIDs []string
	for i := range cfg.rooms {
		var out struct {
			CreateConversation struct{ ID string } `json:"createConversation"`
		}
		if err := alicec.Do(ctx, `mutation($t: String!) { createConversation(input: {title: $t, kind: SHARED}) { id } }`, map[string]any{"t": fmt.Sprintf("chaos %d", i)}, &out); err != nil {
			t.Fatal(err)
		}
		if err := alicec.Do(ctx, `mutation($c: ID!) { addRoomMember(input: {conversationId: $c, email: "bob@example.com"}) { id } }`, map[string]any{"c": out.CreateConversation.ID}, nil); err != nil {
			t.Fatal(err)
		}
		roomIDs = append(roomIDs, out.CreateConversation.ID)
	}
	tokens := map[string]string{}
	for _, email := range []string{alice, bob} {
		if tokens[email], err = e2etest.TokenFor(bin, dataDir, email); err != nil {
			t.Fatal(err)
		}
	}

	// Streams: one per room, reconnecting from its last position whenever
	// its replica dies.
	streamCtx, stopStreams := context.WithCancel(ctx)
	defer stopStreams()
	streams := make([]*streamLog, len(roomIDs))
	var streamsWG sync.WaitGroup
	for i, room := range roomIDs {
		streams[i] = &streamLog{}
		streamsWG.Add(1)
		go func() {
			defer streamsWG.Done()
			srng := rand.New(rand.NewPCG(seed+uint64(i), 7))
			streams[i].follow(streamCtx, cl, srng, tokens[alice], room)
		}()
	}

	// The chaos monkey.
	var kills, pauses atomic.Int64
	monkeyCtx, stopMonkey := context.WithCancel(ctx)
	monkeyDone := make(chan struct{})
	go func() {
		defer close(monkeyDone)
		mrng := rand.New(rand.NewPCG(seed, 99))
		for {
			select {
			case <-monkeyCtx.Done():
				return
			case <-time.After(time.Duration(500+mrng.IntN(1000)) * time.Millisecond):
			}
			i := mrng.IntN(cfg.replicas)
			cl.mu.Lock()
			r := cl.live[i]
			cl.mu.Unlock()
			if r == nil {
				continue
			}
			if mrng.IntN(3) == 0 {
				// Paused for longer than the lease: its runs are recovered
				// elsewhere, and everything it writes on waking is fenced.
				cl.mu.Lock()
				cl.paused[i] = true
				cl.mu.Unlock()
				r.Cmd.Process.Signal(syscall.SIGSTOP)
				pauses.Add(1)
				select {
				case <-time.After(cfg.ttl*3/2 + 200*time.Millisecond):
				case <-monkeyCtx.Done():
				}
				r.Cmd.Process.Signal(syscall.SIGCONT)
				cl.mu.Lock()
				cl.paused[i] = false
				cl.mu.Unlock()
				continue
			}
			cl.mu.Lock()
			cl.live[i] = nil
			cl.mu.Unlock()
			r.Kill9(t)
			kills.Add(1)
			cl.start(i)
		}
	}()

	// Submitters: every turn submitted (at least) twice with one key.
	type submitted struct{ key, author, turnID string }
	var mu sync.Mutex
	var accepted []submitted
	var next atomic.Int64
	var subWG sync.WaitGroup
	for s := range cfg.submitters {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			srng := rand.New(rand.NewPCG(seed+uint64(s)+1000, 3))
			author := alice
			if s%2 == 1 {
				author = bob
			}
			for {
				n := next.Add(1)
				if n > int64(cfg.turns) {
					return
				}
				key := fmt.Sprintf("chaos-%d", n)
				room := roomIDs[srng.IntN(len(roomIDs))]
				var id string
				for sent := 0; sent < 2 || id == ""; sent++ {
					got, err := submitOnce(ctx, cl, srng, tokens[author], room, key)
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						continue // replica gone: retry with the same key
					}
					if id != "" && got != id {
						t.Errorf("key %s: retry returned turn %s, first %s", key, got, id)
					}
					id = got
				}
				mu.Lock()
				accepted = append(accepted, submitted{key, author, id})
				mu.Unlock()
			}
		}()
	}
	subWG.Wait()
	// The storm goes on while the turns run: every accepted turn must reach
	// its terminal through it.
	for _, a := range accepted {
		servertest.WaitTurnState(t, ctx, db, a.turnID)
	}
	stopMonkey()
	<-monkeyDone
	// The streams catch up with every room's head, then stop.
	for i, room := range roomIDs {
		var head int64
		if err := db.QueryRow(`SELECT next_seq FROM conversations WHERE id = $1`, room).Scan(&head); err != nil {
			t.Fatal(err)
		}
		streams[i].waitFor(ctx, t, head)
	}
	stopStreams()
	streamsWG.Wait()

	v := checkJournal(t, db, len(accepted))
	for i, s := range streams {
		v.streamFaults += s.faults(t, roomIDs[i])
	}
	var completed int
	if err := db.QueryRow(`SELECT count(*) FROM turns WHERE state = 'completed'`).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d turns completed; the rest ended failed (a lost lease or exhausted recovery), each once", completed, len(accepted))
	line := fmt.Sprintf("chaos: %d turns, %d kills, %d pauses, %d lost, %d duplicated, %d double-terminal, %d order violations, %d gaps, %d overlapping attempts, %d stream faults",
		len(accepted), kills.Load(), pauses.Load(), v.lost, v.duplicated, v.doubleTerminal, v.order, v.gaps, v.overlap, v.streamFaults)
	fmt.Println(line)
	if v.lost+v.duplicated+v.doubleTerminal+v.order+v.gaps+v.overlap+v.streamFaults > 0 {
		t.Fatal(line)
	}
}

// submitOnce submits through a live replica and returns the turn id.
func submitOnce(ctx context.Context, cl *chaosCluster, rng *rand.Rand, token, room, key string) (string, error) {
	base := cl.pick(rng)
	if base == "" {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		return "", fmt.Errorf("no replica up")
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := &gqlclient.Client{URL: base + "/graphql", Header: http.Header{"X-Turngate-Identity": {token}}, HTTP: servertest.HTTPClient}
	var out struct {
		SubmitMessage struct{ ID string } `json:"submitMessage"`
	}
	err := c.Do(rctx, servertest.SubmitMutation, map[string]any{"c": room, "t": "chaos message " + key, "k": key}, &out)
	return out.SubmitMessage.ID, err
}

// streamLog is what one reconnecting subscriber received.
type streamLog struct {
	mu   sync.Mutex
	seqs []int64
}

func (s *streamLog) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seqs) == 0 {
		return 0
	}
	return s.seqs[len(s.seqs)-1]
}

func (s *streamLog) follow(ctx context.Context, cl *chaosCluster, rng *rand.Rand, token, room string) {
	for ctx.Err() == nil {
		base := cl.pick(rng)
		if base == "" {
			select { // every replica is down or paused for a moment
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		conn, err := gqlclient.Dial(dctx, base+"/graphql", http.Header{"X-Turngate-Identity": {token}}, nil)
		cancel()
		if err != nil {
			continue
		}
		msgs, err := conn.Subscribe(ctx, "s", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": room, "after": s.last()}})
		if err != nil {
			conn.Close()
			continue
		}
	read:
		for {
			select {
			case <-ctx.Done():
				break read
			case m, ok := <-msgs:
				if !ok || m.Type != "next" {
					break read
				}
				var r struct {
					Data struct {
						Journal servertest.WireEntry `json:"journal"`
					} `json:"data"`
				}
				if json.Unmarshal(m.Payload, &r) != nil {
					break read
				}
				s.mu.Lock()
				s.seqs = append(s.seqs, r.Data.Journal.Seq)
				s.mu.Unlock()
			case <-time.After(2 * time.Second):
				// A paused replica holds the connection silently: move on.
				break read
			}
		}
		conn.Close()
	}
}

func (s *streamLog) waitFor(ctx context.Context, t *testing.T, head int64) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.last() < head {
		select {
		case <-ctx.Done():
			t.Fatalf("stream stuck at %d of %d", s.last(), head)
		case <-tick.C:
		}
	}
}

// faults counts gaps and repeats in what the stream received.
func (s *streamLog) faults(t *testing.T, room string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i, seq := range s.seqs {
		if seq != int64(i+1) {
			t.Errorf("room %s: stream entry %d has seq %d", room, i, seq)
			n++
			break
		}
	}
	return n
}

type violations struct {
	lost, duplicated, doubleTerminal, order, gaps, overlap, streamFaults int
}

// checkJournal checks the database after the storm.
func checkJournal(t *testing.T, db *sql.DB, accepted int) violations {
	t.Helper()
	var v violations
	q := func(query string, args ...any) int {
		var n int
		if err := db.QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	// Every accepted key is one turn, with exactly one terminal.
	v.duplicated = q(`SELECT count(*) - count(DISTINCT (conversation_id, author_id, idempotency_key)) FROM turns`)
	v.lost = max(0, accepted-q(`SELECT count(*) FROM turns WHERE idempotency_key LIKE 'chaos-%'`))
	v.lost += q(`SELECT count(*) FROM turns t WHERE state IN ('queued', 'running')`)
	v.doubleTerminal = q(`SELECT count(*) FROM (SELECT turn_id FROM journal_entries WHERE kind = 'turn_terminal' GROUP BY turn_id HAVING count(*) > 1) d`)
	v.lost += q(`SELECT count(*) FROM turns t WHERE NOT EXISTS (SELECT 1 FROM journal_entries WHERE turn_id = t.id AND kind = 'turn_terminal')`)
	// No gaps: positions are dense in every room.
	v.gaps = q(`SELECT count(*) FROM conversations c WHERE next_seq <> (SELECT count(*) FROM journal_entries WHERE conversation_id = c.id)`)
	// Attempts never overlap: every entry of attempt k precedes the start
	// of attempt k+1 in the journal.
	v.overlap = q(`SELECT count(*) FROM journal_entries e JOIN journal_entries s
		ON s.turn_id = e.turn_id AND s.kind = 'turn_started' AND s.attempt > e.attempt AND e.seq > s.seq`)
	// FIFO: a turn first starts only after every earlier turn of its room
	// has its terminal.
	v.order = q(`SELECT count(*) FROM turns a JOIN turns b ON a.conversation_id = b.conversation_id AND a.position < b.position
		WHERE (SELECT min(seq) FROM journal_entries WHERE turn_id = b.id AND kind = 'turn_started') <
		      (SELECT seq FROM journal_entries WHERE turn_id = a.id AND kind = 'turn_terminal')`)
	return v
}
