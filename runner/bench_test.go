package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/runner"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/turn"
)

// pacedModel streams tokens of six bytes ("t0042 ") at a fixed rate and
// records when each left the provider.
type pacedModel struct {
	tokens int
	every  time.Duration

	mu      sync.Mutex
	emitted map[string][]time.Time // by the turn's first message, per token
}

func (m *pacedModel) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	key := req.Messages[len(req.Messages)-1].Content
	times := make([]time.Time, m.tokens)
	tick := time.NewTicker(m.every)
	defer tick.Stop()
	text := make([]byte, 0, 6*m.tokens)
	for i := range m.tokens {
		select {
		case <-ctx.Done():
			return gateway.Result{}, ctx.Err()
		case <-tick.C:
		}
		tok := fmt.Sprintf("t%04d ", i)
		times[i] = time.Now()
		emit(gateway.Delta{Text: tok})
		text = append(text, tok...)
	}
	m.mu.Lock()
	m.emitted[key] = times
	m.mu.Unlock()
	return gateway.Result{Text: string(text), FinishReason: "stop", Usage: gateway.Usage{OutputTokens: m.tokens}}, nil
}

// BenchmarkTokenPath measures the delay from a token leaving the provider
// to reaching a subscriber, with a model streaming 200 tokens/s. The
// subscriber follows the turn's answer deltas through a journal hub of its
// own — the path of a subscriber connected to another replica: Postgres
// NOTIFY, then a read — so the figure includes the coalescing window, the
// commit and the cross-replica wake-up. It also counts the database write
// transactions of each turn (acceptance, start, deltas, terminal: the
// journal-writing transactions, told apart by their start time) per
// second of turn.
func BenchmarkTokenPath(b *testing.B) {
	const rooms, turnsPerRoom, tokens = 4, 3, 200
	env := testkit.New(b)
	env.DB.SetMaxIdleConns(40) // as a replica's pool: idle connections are kept
	env.Agent(b, "single", nil, nil)
	model := &pacedModel{tokens: tokens, every: time.Second / 200, emitted: map[string][]time.Time{}}
	r := env.Runner(b, runner.Config{Gateway: gateway.New(map[string]gateway.Provider{"builtin": model})})
	env.Turns.Runner = r
	sub := journal.NewHub(journal.HubConfig{DB: env.DB, ListenURL: env.URL})
	if err := sub.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer sub.Stop()

	ids := make([]uuid.UUID, rooms)
	for i := range ids {
		c, err := env.Rooms.Create(context.Background(), env.Alice, room.NewInput{Title: fmt.Sprintf("bench %d", i), Kind: "private"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = c.ID
	}
	var mu sync.Mutex
	var lat []time.Duration
	var writes, seconds float64
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, rooms)
	for _, roomID := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range turnsPerRoom {
				text := fmt.Sprintf("room %s turn %d", roomID, j)
				got, err := followTurn(env, sub, roomID, text)
				if err != nil {
					errs <- err
					return
				}
				model.mu.Lock()
				emitted := model.emitted[text]
				model.mu.Unlock()
				var n int
				var span float64
				if err := env.DB.QueryRow(`SELECT count(DISTINCT e.created_at), extract(epoch FROM t.finished_at - t.created_at)
FROM journal_entries e JOIN turns t ON t.id = e.turn_id WHERE e.turn_id = $1 GROUP BY t.finished_at, t.created_at`, got.turn).Scan(&n, &span); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, d := range got.deltas {
					for i := d.offset / 6; i < (d.offset+d.length)/6 && i < len(emitted); i++ {
						lat = append(lat, d.at.Sub(emitted[i]))
					}
				}
				writes += float64(n)
				seconds += span
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) != rooms*turnsPerRoom*tokens {
		b.Fatalf("measured %d tokens, want %d", len(lat), rooms*turnsPerRoom*tokens)
	}
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	b.ReportMetric(float64(p(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(writes/seconds, "writes/turn-s")
	fmt.Printf("token path: %d turns in %d rooms at 200 tokens/s; provider → subscriber p50 %.1f ms, p99 %.1f ms (goal p99 ≤ 100 ms); %.1f write transactions per turn-second (goal ≤ 40)\n",
		rooms*turnsPerRoom, rooms, float64(p(0.5).Microseconds())/1000, float64(p(0.99).Microseconds())/1000, writes/seconds)
	fmt.Printf("goal P4 token path: provider to subscriber p99 %.1f ms (target <= 100 ms), %.1f writes per turn-second (target <= 40) %s\n",
		float64(p(0.99).Microseconds())/1000, writes/seconds, benchVerdict(p(0.99) <= 100*time.Millisecond && writes/seconds <= 40))
}

// benchVerdict is a goal line's verdict.
func benchVerdict(met bool) string {
	if met {
		return "ok"
	}
	return "short"
}

type seenDelta struct {
	offset, length int
	at             time.Time
}

type followed struct {
	turn   uuid.UUID
	deltas []seenDelta
}

// followTurn submits text and follows the turn's deltas to its terminal.
func followTurn(env *testkit.Env, hub *journal.Hub, roomID uuid.UUID, text string) (followed, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head, err := journal.Head(ctx, env.DB, roomID)
	if err != nil {
		return followed{}, err
	}
	t, err := env.Turns.Submit(ctx, turn.Submission{Member: env.Alice, ConversationID: roomID, Text: text, IdempotencyKey: uuid.NewString()})
	if err != nil {
		return followed{}, err
	}
	out := followed{turn: t.ID}
	errDone := fmt.Errorf("done")
	err = journal.Follow(ctx, env.DB, hub, roomID, head, nil, func(e journal.Entry) error {
		at := time.Now()
		switch e.Kind {
		case journal.KindAnswerDelta:
			var d journal.DeltaPayload
			if err := json.Unmarshal(e.Payload, &d); err != nil {
				return err
			}
			out.deltas = append(out.deltas, seenDelta{offset: d.Offset, length: len(d.Text), at: at})
		case journal.KindTurnTerminal:
			return errDone
		}
		return nil
	})
	if err != errDone {
		return out, err
	}
	return out, nil
}

// echoTool returns its arguments: a tool that costs nothing, so the
// orchestration around it is what is measured.
type echoTool struct{}

func (echoTool) Spec() tools.Spec {
	return tools.Spec{Name: "echo", Description: "returns its arguments", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (echoTool) Permission() string { return "" }
func (echoTool) Run(_ context.Context, c tools.Call) (tools.Result, error) {
	return tools.Result{Content: string(c.Arguments)}, nil
}

// twoToolsThenAnswer is an instant model: its first step asks for two
// tool calls, its next answers.
func twoToolsThenAnswer(_ context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role != "tool" && len(req.Tools) > 0 {
		return gateway.Result{FinishReason: "tool_calls", Usage: gateway.Usage{InputTokens: 20, OutputTokens: 10}, ToolCalls: []gateway.ToolCall{
			{ID: "a", Name: "echo", Arguments: `{"n":1}`}, {ID: "b", Name: "echo", Arguments: `{"n":2}`}}}, nil
	}
	emit(gateway.Delta{Text: "done"})
	return gateway.Result{Text: "done", FinishReason: "stop", Usage: gateway.Usage{InputTokens: 40, OutputTokens: 1}}, nil
}

type modelFunc func(context.Context, gateway.Request, func(gateway.Delta)) (gateway.Result, error)

func (f modelFunc) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	return f(ctx, req, emit)
}

// BenchmarkOrchestration measures what turngate itself spends to run a
// turn with an instant model and two tool calls. 32 rooms each hold 30
// accepted turns; then one runner starts and works through all 960. Each
// turn is claimed, admitted, runs two model steps and two tools (each
// journaled before and after), checkpoints, and commits its answer with
// the terminal. CPU time is this process's (user + system) from the
// runner's start to the last terminal, per turn; acceptance (measured by
// BenchmarkDurableAcceptance) and Postgres's own CPU are not in it.
func BenchmarkOrchestration(b *testing.B) {
	const rooms, perRoom = 32, 30
	env := testkit.New(b)
	// As a replica's pool does (server/app.go): idle connections are
	// kept, not closed and reopened under load.
	env.DB.SetMaxIdleConns(40)
	env.Agent(b, "react", []string{"echo"}, nil)
	for i := range rooms {
		c, err := env.Rooms.Create(context.Background(), env.Alice, room.NewInput{Title: fmt.Sprintf("bench %d", i), Kind: "private"})
		if err != nil {
			b.Fatal(err)
		}
		for range perRoom {
			env.Submit(b, env.Alice, c.ID, "go")
		}
	}
	total := rooms * perRoom
	cpu0 := cpuTime()
	start := time.Now()
	b.ResetTimer()
	env.Runner(b, runner.Config{
		Gateway: gateway.New(map[string]gateway.Provider{"builtin": modelFunc(twoToolsThenAnswer)}),
		Tools:   tools.NewRegistry(echoTool{}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var ended, completed int
		if err := env.DB.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE state IN ('completed', 'failed', 'cancelled')),
  count(*) FILTER (WHERE state = 'completed') FROM turns`).Scan(&ended, &completed); err != nil {
			b.Fatal(err)
		}
		if ended == total {
			if completed != total {
				b.Fatalf("%d of %d turns completed", completed, total)
			}
			break
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d turns ended before the deadline", ended, total)
		case <-tick.C:
		}
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	perTurn := float64(cpu.Microseconds()) / 1000 / float64(total)
	b.ReportMetric(perTurn, "cpu-ms/turn")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "turns/s")
	fmt.Printf("orchestration: %d turns over %d rooms in %.1f s, instant model, 2 tool calls each: %.0f turns/s, %.2f ms CPU per turn in turngate (goal ≤ 2 ms)\n",
		total, rooms, elapsed.Seconds(), float64(total)/elapsed.Seconds(), perTurn)
	fmt.Printf("goal P7 orchestration: %.2f ms CPU per turn (target <= 2 ms) %s\n", perTurn, benchVerdict(perTurn <= 2))
}

func waitEnded(env *testkit.Env, t *ent.Turn) (*ent.Turn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		wake := env.Hub.Wait(t.ConversationID)
		got, err := env.Client.Turn.Get(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		if got.State != "queued" && got.State != "running" {
			return got, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
