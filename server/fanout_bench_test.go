package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

// fanoutSubscribers is how many journal subscribers BenchmarkFanOut opens
// (TURNGATE_FANOUT_SUBSCRIBERS, default 10,000).
func fanoutSubscribers() int {
	if n, err := strconv.Atoi(os.Getenv("TURNGATE_FANOUT_SUBSCRIBERS")); err == nil && n > 0 {
		return n
	}
	return 10000
}

// raiseFileLimit lifts the soft file-descriptor limit to the hard one:
// every subscriber is a socket here and one in the server.
func raiseFileLimit(b *testing.B) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
}

// dbTransactions is the database's committed and rolled-back transactions
// so far, as its statistics have them (each autocommit query is one).
func dbTransactions(b *testing.B, w *e2etest.World) int64 {
	var n int64
	if err := w.DB.QueryRow(`SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// settledRate is the database's transaction rate over windows of length
// window, once two windows in a row agree, or the last one when limit
// runs out first.
func settledRate(b *testing.B, ctx context.Context, w *e2etest.World, window, limit time.Duration) float64 {
	tick := time.NewTicker(window)
	defer tick.Stop()
	deadline := time.Now().Add(limit)
	last, prev := dbTransactions(b, w), -1.0
	for {
		select {
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		case <-tick.C:
		}
		now := dbTransactions(b, w)
		rate := float64(now-last) / window.Seconds()
		last = now
		if prev >= 0 && (math.Abs(rate-prev) <= 1 || math.Abs(rate-prev) <= 0.2*prev) || time.Now().After(deadline) {
			return rate
		}
		prev = rate
	}
}

// BenchmarkFanOut is goal P3: N graphql-transport-ws journal subscribers
// on one replica (a real process), all in one room and then spread over
// 100 rooms. It measures the database's idle transaction rate with no
// subscriber and with N (flat is the goal), the server's memory per
// subscriber, and how long each answer delta of one turn takes from its
// commit (the entry's createdAt) to each subscriber of its room.
func BenchmarkFanOut(b *testing.B) {
	raiseFileLimit(b)
	n := fanoutSubscribers()
	bin := e2etest.Binary(b)
	w := e2etest.NewWorld(b, bin, "turngate-fanout-")
	env := []string{"TURNGATE_MAX_STREAMS_PER_MEMBER=1000000", "TURNGATE_MAX_SUBSCRIPTIONS=1000000",
		"TURNGATE_MODEL_PACE=20ms", "TURNGATE_COMMAND_RATE=1e9", "TURNGATE_COMMAND_BURST=1000000"}
	r := w.Start(b, "fanout-setup", env...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tok, err := e2etest.TokenFor(bin, w.DataDir, alice)
	if err != nil {
		b.Fatal(err)
	}
	hdr := http.Header{"X-Turngate-Identity": {tok}}
	c := &gqlclient.Client{URL: r.Base + "/graphql", Header: hdr, HTTP: servertest.HTTPClient}
	var rs struct {
		Conversations struct {
			Edges []struct{ Node struct{ ID, Title string } }
		}
	}
	if err := c.Do(ctx, `{ conversations(first: 100) { edges { node { id title } } } }`, nil, &rs); err != nil {
		b.Fatal(err)
	}
	var team string
	for _, e := range rs.Conversations.Edges {
		if e.Node.Title == "Team room" {
			team = e.Node.ID
		}
	}
	var spread []string
	for i := range 100 {
		var made struct{ CreateConversation struct{ ID string } }
		if err := c.Do(ctx, `mutation($t: String!) { createConversation(input: {title: $t, kind: PRIVATE}) { id } }`,
			map[string]any{"t": fmt.Sprintf("fan-out %d", i)}, &made); err != nil {
			b.Fatal(err)
		}
		spread = append(spread, made.CreateConversation.ID)
	}
	r.Stop()
	measureIdle := os.Getenv("TURNGATE_FANOUT_IDLE") != "0" // 0 skips the idle windows, to iterate on the delta path
	idle := func() float64 {
		if !measureIdle {
			return 0
		}
		// Statistics reach pg_stat_database up to about 10 s after a
		// backend goes idle, so the previous phase's work trickles in:
		// measure 5 s windows until two in a row agree (within 20% or
		// 1 tx/s), for at most a minute, and report the last.
		return settledRate(b, ctx, w, 5*time.Second, time.Minute)
	}
	for _, layout := range []struct {
		name  string
		rooms []string
		sse   bool // SSE streams instead of graphql-transport-ws
		n     int
	}{{"one room", []string{team}, false, n}, {"100 rooms", spread, false, n}, {"SSE, one room", []string{team}, true, min(n, 1000)}} {
		n := layout.n
		// A fresh replica per layout, so its memory is this layout's; its
		// profiles on an operators' address of its own.
		debugAddr := freeAddr(b)
		r := w.Start(b, "fanout-"+strings.ReplaceAll(layout.name, " ", "-"), append(env, "TURNGATE_METRICS_ADDR="+debugAddr, "TURNGATE_PPROF=true")...)
		pid := r.Cmd.Process.Pid
		c := &gqlclient.Client{URL: r.Base + "/graphql", Header: hdr, HTTP: servertest.HTTPClient}
		base := idle()
		rssBefore := e2etest.ProcessRSS(pid)
		conns := make([]*gqlclient.Conn, n)
		streams := make([]<-chan gqlclient.Message, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		dialStart := time.Now()
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				req := gqlclient.Request{
					Query:     `subscription($c: ID!, $a: Int) { journal(conversationId: $c, after: $a) { seq kind createdAt } }`,
					Variables: map[string]any{"c": layout.rooms[i%len(layout.rooms)], "a": 0},
				}
				if layout.sse {
					var err error
					if streams[i], err = sseSubscribe(ctx, r.Base+"/graphql", hdr, req); err != nil {
						b.Error(err)
					}
					return
				}
				conn, err := gqlclient.Dial(ctx, r.Base+"/graphql", hdr, nil)
				if err != nil {
					b.Error(err)
					return
				}
				conns[i] = conn
				// From a position ahead of the history: only what comes next.
				streams[i], err = conn.Subscribe(ctx, "j", req)
				if err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		if b.Failed() {
			return
		}
		connected := time.Since(dialStart)
		// Drain the replayed history, then measure.
		drained := make(chan struct{})
		var lat []time.Duration
		var lmu sync.Mutex
		var got sync.WaitGroup
		turnStart := time.Now().Add(time.Hour) // set when the turn is submitted
		var startMu sync.Mutex
		for i := range n {
			got.Add(1)
			go func(ch <-chan gqlclient.Message, inFirst bool) {
				defer got.Done()
				drained := drained
				for {
					select {
					case <-drained:
						if !inFirst {
							return
						}
						drained = nil // keep reading the first room's stream
					case <-ctx.Done():
						return
					case m, ok := <-ch:
						if !ok {
							return
						}
						var p struct {
							Data struct {
								Journal struct {
									Kind      string
									CreatedAt time.Time
								}
							}
						}
						if m.Type != "next" || json.Unmarshal(m.Payload, &p) != nil {
							continue
						}
						now := time.Now()
						startMu.Lock()
						live := p.Data.Journal.CreatedAt.After(turnStart)
						startMu.Unlock()
						if live && p.Data.Journal.Kind == "ANSWER_DELTA" {
							lmu.Lock()
							lat = append(lat, now.Sub(p.Data.Journal.CreatedAt))
							lmu.Unlock()
						}
						if live && p.Data.Journal.Kind == "TURN_TERMINAL" {
							return
						}
					}
				}
			}(streams[i], i%len(layout.rooms) == 0)
		}
		withSubs := idle()
		rss := e2etest.ProcessRSS(pid) - rssBefore
		perSub := float64(rss) / float64(n) / 1024
		startMu.Lock()
		turnStart = time.Now()
		startMu.Unlock()
		close(drained)
		// With TURNGATE_FANOUT_PROFILE=1, the server's CPU profile while
		// the turn reaches every subscriber says where a delta's time
		// goes (off by default: profiling costs the latencies measured).
		profiled := make(chan []byte, 1)
		if os.Getenv("TURNGATE_FANOUT_PROFILE") == "1" {
			go func() { profiled <- cpuProfile(ctx, "http://"+debugAddr, 6) }()
		} else {
			profiled <- nil
		}
		if _, err := submitTurn(ctx, c, layout.rooms[0], "When is the launch?"); err != nil {
			b.Fatal(err)
		}
		got.Wait()
		if prof := <-profiled; prof != nil {
			printProfileTop(b, bin, prof, "fan-out "+layout.name, 12)
		}
		for _, conn := range conns {
			if conn != nil {
				conn.Close()
			}
		}
		r.Stop()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p99 := time.Duration(0)
		if len(lat) > 0 {
			p99 = lat[len(lat)*99/100]
		}
		verdict := "ok"
		if withSubs > base*1.5+5 || perSub > 40 || p99 > 250*time.Millisecond || len(lat) == 0 {
			verdict = "short"
		}
		fmt.Printf("fan-out %s: %d subscribers connected in %s; %d delta arrivals\n", layout.name, n, connected.Round(time.Millisecond), len(lat))
		fmt.Printf("goal P3 fan-out (%s, %d subscribers): idle db %.1f tx/s vs %.1f without (<= 1.5x), %.1f KiB/subscriber (<= 40), delta p99 %s (<= 250ms) %s\n",
			layout.name, n, withSubs, base, perSub, p99.Round(time.Millisecond), verdict)
	}
}

// submitTurn submits text to room as c.
func submitTurn(ctx context.Context, c *gqlclient.Client, room, text string) (string, error) {
	var out struct {
		SubmitMessage struct{ ID string } `json:"submitMessage"`
	}
	err := c.Do(ctx, servertest.SubmitMutation, map[string]any{"c": room, "t": text, "k": "fanout-" + strconv.FormatInt(time.Now().UnixNano(), 36)}, &out)
	return out.SubmitMessage.ID, err
}

// sseSubscribe opens one subscription over SSE (gqlgen's transport: a
// POST answered with text/event-stream) and delivers each `next` event's
// data as a message, as a graphql-transport-ws subscription would. The
// stream ends with ctx.
func sseSubscribe(ctx context.Context, url string, hdr http.Header, r gqlclient.Request) (<-chan gqlclient.Message, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := sseClient.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, fmt.Errorf("SSE subscribe: HTTP %d", res.StatusCode)
	}
	out := make(chan gqlclient.Message, 64)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "next":
				select {
				case out <- gqlclient.Message{Type: "next", Payload: json.RawMessage(strings.TrimPrefix(line, "data: "))}:
				case <-ctx.Done():
					return
				}
			case line == "":
				event = ""
			}
		}
	}()
	return out, nil
}

// sseClient keeps a connection per stream: SSE holds each one open.
var sseClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 0}}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// cpuProfile fetches seconds of a server's CPU profile from its
// operators' address; nil when it cannot.
func cpuProfile(ctx context.Context, base string, seconds int) []byte {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds), nil)
	if err != nil {
		return nil
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return nil
	}
	return raw
}

// printProfileTop prints the n functions with the most cumulative CPU in
// prof (go tool pprof -top -cum), so a run says where its time went.
func printProfileTop(b *testing.B, bin string, prof []byte, what string, n int) {
	path := filepath.Join(b.TempDir(), "cpu.pprof")
	if err := os.WriteFile(path, prof, 0o644); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", fmt.Sprintf("-nodecount=%d", n), bin, path).CombinedOutput()
	if err != nil {
		fmt.Printf("%s: pprof: %v\n", what, err)
		return
	}
	fmt.Printf("%s: the server's CPU profile while the turn reached every subscriber (top %d by cumulative time):\n%s", what, n, out)
}
