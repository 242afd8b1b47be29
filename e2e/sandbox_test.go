package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// scriptModel is an OpenAI-compatible endpoint, speaking the streaming
// wire format, whose model runs the script the member's message names with
// run_code and, once told the result, answers. It keeps the tool message
// it was given for each message.
type scriptModel struct {
	scripts map[string]string // by a key the member's message contains

	mu    sync.Mutex
	tools map[string]string // the tool message's content, by key
}

func (m *scriptModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct{ Role, Content string } `json:"messages"`
		Tools    []any                            `json:"tools"`
	}
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := ""
	for _, msg := range body.Messages {
		if msg.Role != "user" {
			continue
		}
		for k := range m.scripts {
			if strings.Contains(msg.Content, k) {
				key = k // the last user message naming one wins
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
	}
	last := body.Messages[len(body.Messages)-1]
	if len(body.Tools) > 0 && last.Role != "tool" && key != "" {
		args, _ := json.Marshal(map[string]string{"script": m.scripts[key]})
		call, _ := json.Marshal(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"index": 0, "id": "call_" + key, "type": "function",
			"function": map[string]any{"name": "run_code", "arguments": string(args)},
		}}})
		send(string(call), "null")
		send(`{}`, `"tool_calls"`)
	} else {
		if last.Role == "tool" {
			m.mu.Lock()
			m.tools[key] = last.Content
			m.mu.Unlock()
		}
		send(`{"role":"assistant","content":"Done."}`, "null")
		send(`{}`, `"stop"`)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// toolMessage is what the model was told run_code did for key.
func (m *scriptModel) toolMessage(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tools[key]
}

// turnEnd polls the turn until it is terminal and returns its state; an
// error when ctx ends first. Unlike waitTurnState, safe on any goroutine.
func turnEnd(ctx context.Context, db *sql.DB, id string) (string, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var state string
		if err := db.QueryRowContext(ctx, `SELECT state FROM turns WHERE id = $1`, id).Scan(&state); err != nil {
			return "", fmt.Errorf("turn %s: %w", id, err)
		}
		if state != "queued" && state != "running" {
			return state, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("turn %s still %s: %w", id, state, ctx.Err())
		case <-tick.C:
		}
	}
}

// children are pid's child processes (listed per thread that forked them).
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, task := range tasks {
		raw, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(raw)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}

// treeRSS is the VmRSS of the server process plus its children (its
// sandbox workers: with DATABASE_URL it starts no Postgres).
type treeRSS struct {
	server, workers int64
	nworkers        int
}

func (r treeRSS) total() int64 { return r.server + r.workers }

func (r treeRSS) String() string {
	return fmt.Sprintf("%d MiB (server %d MiB + %d workers %d MiB)", r.total()>>20, r.server>>20, r.nworkers, r.workers>>20)
}

func measureTree(pid int) treeRSS {
	r := treeRSS{server: e2etest.ProcessRSS(pid)}
	for _, child := range children(pid) {
		r.workers += e2etest.ProcessRSS(child)
		r.nworkers++
	}
	return r
}

// TestSandboxMemoryAttack is the acceptance test of run_code's memory
// bound, on the real binary: four rooms' turns run hostile scripts at
// once, each trying to take a gigabyte or more. Sampled every 5 ms, the
// server process plus its sandbox workers stay under their idle RSS +
// 4 × the 128 MiB cap + 64 MiB; each turn ends, the model being told the
// memory limit was hit; the next turn in each room runs normally.
func TestSandboxMemoryAttack(t *testing.T) {
	t.Parallel()
	bin := e2etest.PlainBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	hostile := map[string]string{
		"huge-string":     `x = "x" * 1000000000`,
		"huge-list":       `x = [0] * 100000000`,
		"growing-list":    "x = []\nfor i in range(10000000):\n    x.append('y' * 100000)",
		"string-doubling": "s = 'x'\nfor i in range(40):\n    s = s + s",
	}
	model := &scriptModel{scripts: map[string]string{"sum-a-range": "n = 0\nfor i in range(10):\n    n += i\nprint(n)"}, tools: map[string]string{}}
	for k, s := range hostile {
		model.scripts[k] = s
	}
	endpoint := httptest.NewServer(model)
	defer endpoint.Close()

	dbURL := dbtest.NewDB(t)
	dataDir, err := os.MkdirTemp("", "turngate-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	// The sandbox's limits are the defaults, 4 workers of 128 MiB, but
	// for the wall time: 90 s instead of 2, so that it is the memory
	// limit, the one under test, that stops each script. The growing list
	// needs some 0.6 s of CPU to reach the limit, but its worker runs at
	// niceness 10: on a machine the rest of the tier keeps busy it gets a
	// few percent of a core, and once took more than 20 s.
	srv := e2etest.StartReplica(t, bin, "sandbox", dbURL, dataDir, "TURNGATE_SANDBOX_WALL_TIME=90s", "TURNGATE_SANDBOX_LAZY=false", "TURNGATE_AGENT_ROUTE=openai",
		"TURNGATE_OPENAI_BASE_URL="+endpoint.URL, "TURNGATE_OPENAI_API_KEY=sk-local", "TURNGATE_OPENAI_MODEL=m")
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := e2etest.ClientFor(t, bin, srv.Base, dataDir, alice)

	const memCap = server.DefaultSandboxMemory
	pid := srv.Cmd.Process.Pid
	keys := []string{"huge-string", "huge-list", "growing-list", "string-doubling"}
	roomOf := map[string]string{}
	for _, k := range keys {
		var out struct {
			CreateConversation struct{ ID string } `json:"createConversation"`
		}
		if err := c.Do(ctx, `mutation($t: String!) { createConversation(input: {title: $t, kind: SHARED}) { id } }`,
			map[string]any{"t": "room " + k}, &out); err != nil {
			t.Fatal(err)
		}
		roomOf[k] = out.CreateConversation.ID
	}
	// ask submits a turn in room asking for script key and waits for its
	// end; safe on any goroutine.
	ask := func(room, key, idem string) string {
		var out struct {
			SubmitMessage struct{ ID string } `json:"submitMessage"`
		}
		if err := c.Do(ctx, servertest.SubmitMutation, map[string]any{"c": room, "t": "please run " + key, "k": idem}, &out); err != nil {
			t.Error(err)
			return ""
		}
		state, err := turnEnd(ctx, db, out.SubmitMessage.ID)
		if err != nil {
			t.Error(err)
		}
		return state
	}

	// Warm: one ordinary run_code turn, so that idle means a server that
	// has served a turn, with its workers started.
	if state := ask(roomOf[keys[0]], "sum-a-range", "warm"); state != "completed" {
		t.Fatalf("warm-up turn ended %s", state)
	}
	idle := measureTree(pid)
	if idle.nworkers != server.DefaultSandboxWorkers {
		t.Fatalf("the server has %d children, want its %d sandbox workers", idle.nworkers, server.DefaultSandboxWorkers)
	}
	bound := idle.total() + server.DefaultSandboxWorkers*memCap + 64<<20

	// Sample the tree every 5 ms while the four hostile turns run.
	stop := make(chan struct{})
	sampled := make(chan treeRSS, 1)
	go func() {
		var peak treeRSS
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sampled <- peak
				return
			case <-tick.C:
				if now := measureTree(pid); now.total() > peak.total() {
					peak = now
				}
			}
		}
	}()
	var wg sync.WaitGroup
	states := make([]string, len(keys))
	start := time.Now()
	for i, k := range keys {
		wg.Go(func() { states[i] = ask(roomOf[k], k, "attack-"+k) })
	}
	wg.Wait()
	attack := time.Since(start)
	close(stop)
	peak := <-sampled

	for i, k := range keys {
		if states[i] != "completed" {
			t.Errorf("%s: the turn ended %s, want completed (the model told, and answering)", k, states[i])
		}
		if msg := model.toolMessage(k); !strings.Contains(msg, "memory limit exceeded") || !strings.Contains(msg, "128 MiB") {
			t.Errorf("%s: the model was told %q, want the memory limit", k, msg)
		}
	}
	report := fmt.Sprintf("run_code memory attack (4 rooms at once, %v): idle RSS %s; peak RSS %s; bound idle + 4 x %d MiB + 64 MiB = %d MiB",
		attack.Round(time.Millisecond), idle, peak, memCap>>20, bound>>20)
	t.Log(report)
	fmt.Println(report)
	if peak.total() > bound {
		t.Errorf("peak RSS %d MiB is over the bound of %d MiB", peak.total()>>20, bound>>20)
	}

	// The next turn in each room runs normally, on replaced workers.
	for _, k := range keys {
		wg.Go(func() {
			if state := ask(roomOf[k], "sum-a-range", "after-"+k); state != "completed" {
				t.Errorf("%s: the next turn ended %s", k, state)
			}
		})
	}
	wg.Wait()
	if msg := model.toolMessage("sum-a-range"); !strings.Contains(msg, "output:\n45\n") {
		t.Errorf("the next turns' run_code said %q, want the output 45", msg)
	}
	after := measureTree(pid)
	t.Logf("after: RSS %s", after)
	if after.nworkers != server.DefaultSandboxWorkers {
		t.Errorf("the server has %d workers after the attack, want %d", after.nworkers, server.DefaultSandboxWorkers)
	}
}
