package runner_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/room"
	"github.com/turngate/turngate/runner"
)

// pacedBuiltin is the builtin model with a pace that can change: instant
// while a room's history is being made, a token every few milliseconds
// (like a provider) while turns are measured.
type pacedBuiltin struct{ pace atomic.Int64 }

func (p *pacedBuiltin) Stream(ctx context.Context, req gateway.Request, emit func(gateway.Delta)) (gateway.Result, error) {
	return gateway.Builtin{Pace: time.Duration(p.pace.Load())}.Stream(ctx, req, emit)
}

// BenchmarkLongRoom measures what a room's history costs a turn: time to
// first token (submit to the first answer delta at a follower) and model
// input tokens (every call of the turn, compaction included), in a room
// with 1,000 earlier turns against one with 50 (and an empty one), side
// by side. The agent
// is the react controller with a 1,000-token context budget and the
// builtin model streaming a token every 2 ms; the long room's history is
// made by real turns (instant model), so its summary is whatever those
// turns' compactions left, as in use.
func BenchmarkLongRoom(b *testing.B) {
	const earlier, measured = 1000, 20
	env := testkit.New(b)
	env.DB.SetMaxIdleConns(40) // as a replica's pool: idle connections are kept
	env.Agent(b, "react", nil, map[string]int64{"context_tokens": 1000})
	model := &pacedBuiltin{}
	r := env.Runner(b, runner.Config{Gateway: gateway.New(map[string]gateway.Provider{"builtin": model})})
	env.Turns.Runner = r
	ctx := context.Background()
	// fill makes a room with n earlier turns, run one after the other.
	fill := func(title string, n int) uuid.UUID {
		c, err := env.Rooms.Create(ctx, env.Alice, room.NewInput{Title: title, Kind: "private"})
		if err != nil {
			b.Fatal(err)
		}
		var last uuid.UUID
		for i := range n {
			last = env.Submit(b, env.Alice, c.ID, fmt.Sprintf("message %d: how is the plan for item %d going, and what did we decide about it?", i, i)).ID
		}
		if got := env.WaitTerminal(b, last); got.State != "completed" {
			b.Fatalf("the last earlier turn ended %s", got.State)
		}
		var completed int
		if err := env.DB.QueryRow(`SELECT count(*) FROM turns WHERE conversation_id = $1 AND state = 'completed'`, c.ID).Scan(&completed); err != nil || completed != n {
			b.Fatalf("%d of %d earlier turns completed (%v)", completed, n, err)
		}
		return c.ID
	}
	start := time.Now()
	longID := fill("long", earlier)
	fmt.Printf("long room: %d earlier turns made in %.1f s\n", earlier, time.Since(start).Seconds())
	shortID := fill("short", 50)

	model.pace.Store(int64(2 * time.Millisecond))
	b.ResetTimer()
	// Per room kind (empty, 50 earlier turns, 1,000): time to first
	// token, input tokens of the answer step, of every call of the turn.
	var ttft [3][]time.Duration
	var tokens, total [3][]float64
	for i := range measured {
		empty, err := env.Rooms.Create(ctx, env.Alice, room.NewInput{Title: fmt.Sprintf("empty %d", i), Kind: "private"})
		if err != nil {
			b.Fatal(err)
		}
		for k, roomID := range []uuid.UUID{empty.ID, shortID, longID} {
			text := fmt.Sprintf("message %d: what is the state of item %d now?", earlier+i, i)
			t0 := time.Now()
			got, err := followTurn(env, env.Hub, roomID, text)
			if err != nil {
				b.Fatal(err)
			}
			if len(got.deltas) == 0 {
				b.Fatalf("turn %s streamed nothing", got.turn)
			}
			ttft[k] = append(ttft[k], got.deltas[0].at.Sub(t0))
			var in, all float64
			if err := env.DB.QueryRow(`SELECT coalesce(sum(input_tokens) FILTER (WHERE purpose = 'step'), 0), coalesce(sum(input_tokens), 0)
FROM model_calls WHERE turn_id = $1`, got.turn).Scan(&in, &all); err != nil {
				b.Fatal(err)
			}
			tokens[k] = append(tokens[k], in)
			total[k] = append(total[k], all)
		}
	}
	b.StopTimer()
	var summary journal.CompactionPayload
	_ = env.DB.QueryRow(`SELECT through_position, turns FROM room_summaries WHERE conversation_id = $1`, longID).Scan(&summary.Through, &summary.Turns)
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	ms := func(ds []time.Duration) []float64 {
		out := make([]float64, len(ds))
		for i, d := range ds {
			out[i] = float64(d.Microseconds()) / 1000
		}
		return out
	}
	p99 := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[int(0.99*float64(len(s)-1))]
	}
	emptyT, shortT, longT := ms(ttft[0]), ms(ttft[1]), ms(ttft[2])
	// The goal: 1,000 earlier turns cost a turn no more than 50 do (an
	// empty room, with no summary to read, is printed for reference).
	tRatio := mean(longT) / mean(shortT)
	kRatio := mean(tokens[2]) / mean(tokens[1])
	b.ReportMetric(tRatio, "ttft-ratio")
	b.ReportMetric(kRatio, "tokens-ratio")
	fmt.Printf("long room: %d turns each; time to first token mean (max) %.1f ms (%.1f) with 1,000 earlier turns, %.1f ms (%.1f) with 50, %.1f ms (%.1f) in an empty room\n",
		measured, mean(longT), p99(longT), mean(shortT), p99(shortT), mean(emptyT), p99(emptyT))
	fmt.Printf("long room: answer-step input tokens %.0f / %.0f / %.0f, all calls of the turn (compaction included) %.0f / %.0f / %.0f (1,000 / 50 / empty); 1,000 vs 50 earlier turns: %.2fx time, %.2fx tokens; the summary covers %d turns through position %d\n",
		mean(tokens[2]), mean(tokens[1]), mean(tokens[0]), mean(total[2]), mean(total[1]), mean(total[0]),
		mean(longT)/mean(shortT), mean(tokens[2])/mean(tokens[1]), summary.Turns, summary.Through)
	fmt.Printf("goal P10 long rooms: 1,000 earlier turns vs 50: time to first token %.2fx, input tokens %.2fx (target <= 1.2x each) %s\n",
		tRatio, kRatio, benchVerdict(tRatio <= 1.2 && kRatio <= 1.2))
}
