package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/tools"
)

// benchHistoryTurns finished turns make the searched room: each a message
// and an answer, 100,000 messages in all.
const benchHistoryTurns = 50_000

// BenchmarkHistorySearch measures the latency of history_search in a room
// of 100,000 messages (50,000 finished turns, message and answer of 8–30
// words each, Zipf-distributed from a 5,000-word vocabulary): 2,000 queries
// of 1–3 words, half of them words as they occur in text (mostly frequent),
// half drawn evenly (mostly rare), through the real tool as a member of
// the room. Loading is not timed.
func BenchmarkHistorySearch(b *testing.B) {
	ctx := context.Background()
	env := testkit.New(b)
	rng := rand.New(rand.NewSource(2))
	vocab := benchWords(rng, benchVocabulary)
	zipf := rand.NewZipf(rng, 1.07, 1, uint64(len(vocab)-1))
	sentence := func() string {
		words := make([]string, 8+rng.Intn(23))
		for i := range words {
			words[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(words, " ")
	}
	start := time.Now()
	var avID uuid.UUID
	if err := env.DB.QueryRowContext(ctx, `SELECT id FROM agent_versions ORDER BY version DESC LIMIT 1`).Scan(&avID); err != nil {
		b.Fatal(err)
	}
	tx, err := env.DB.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.Prepare(pq.CopyIn("turns", "id", "idempotency_key", "input", "answer", "position", "state", "agent_version_id",
		"authority_bundle", "authority_digest", "conversation_id", "author_id", "started_at", "finished_at"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range benchHistoryTurns {
		if _, err := stmt.Exec(uuid.New(), fmt.Sprintf("history-%d", i), sentence(), sentence(), 1_000_000+i, "completed", avID,
			"{}", "bench", env.Shared.ID, env.Alice.ID, now, now); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := stmt.Exec(); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{`VACUUM turns`, `ANALYZE turns`} {
		if _, err := env.DB.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded %d turns in %s", benchHistoryTurns, time.Since(start).Round(time.Millisecond))

	actor := tools.Actor{MemberID: env.Alice.ID, Email: env.Alice.Email, ConversationID: env.Shared.ID, TurnID: uuid.New(), Shared: true}
	queries := make([]json.RawMessage, benchWarmup+benchQueries)
	for i := range queries {
		words := make([]string, 1+rng.Intn(3))
		for j := range words {
			if rng.Intn(2) == 0 {
				words[j] = vocab[zipf.Uint64()]
			} else {
				words[j] = vocab[rng.Intn(len(vocab))]
			}
		}
		queries[i], _ = json.Marshal(map[string]any{"query": strings.Join(words, " ")})
	}
	var search tools.HistorySearch
	run := func(args json.RawMessage) (tools.Result, error) {
		return search.Run(ctx, tools.Call{Actor: actor, DB: env.DB, Arguments: args, Now: now})
	}
	for _, q := range queries[:benchWarmup] {
		if _, err := run(q); err != nil {
			b.Fatal(err)
		}
	}
	queries = queries[benchWarmup:]
	b.ResetTimer()
	var lat []time.Duration
	found := 0
	for range b.N {
		lat, found = lat[:0], 0
		for _, q := range queries {
			t0 := time.Now()
			res, err := run(q)
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Citations) > 0 {
				found++
			}
		}
	}
	b.StopTimer()
	if os.Getenv("TURNGATE_HISTORY_EXPLAIN") == "1" {
		// The plan of the slowest query, as the database ran it.
		slowest := 0
		for i := range lat {
			if lat[i] > lat[slowest] {
				slowest = i
			}
		}
		var q struct{ Query string }
		_ = json.Unmarshal(queries[slowest], &q)
		stmt, args := tools.HistorySearchSQL(actor, q.Query)
		rows, err := env.DB.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+stmt, args...)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("history search: the plan of the slowest query (%q, %s):\n", q.Query, lat[slowest].Round(time.Microsecond))
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			fmt.Println("  " + line)
		}
		rows.Close()
	}
	slices.Sort(lat)
	p50, p99 := benchPercentile(lat, 50), benchPercentile(lat, 99)
	b.ReportMetric(benchMS(p50), "p50-ms")
	b.ReportMetric(benchMS(p99), "p99-ms")
	fmt.Printf("history search: %d messages in one room, p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d of %d queries found turns\n",
		2*benchHistoryTurns, benchMS(p50), benchMS(p99), benchMS(lat[len(lat)-1]), found, len(queries))
	fmt.Printf("goal P8 history search over %d messages: p99 %.2f ms (target <= 20 ms) %s\n", 2*benchHistoryTurns, benchMS(p99), verdict(p99 <= 20*time.Millisecond))
}

func verdict(met bool) string {
	if met {
		return "ok"
	}
	return "short"
}
