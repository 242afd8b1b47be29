package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

const (
	// anonCostRequests is how many requests of each hostile shape are
	// measured; the server's CPU is counted in 10 ms ticks.
	anonCostRequests = 400
	// anonAttackers is how many anonymous clients attack at once.
	anonAttackers = 4
	// anonRounds of anonRound each, idle and under attack alternately.
	anonRounds = 5
	anonRound  = 2 * time.Second
)

// BenchmarkAnonymousCost is goal S1: what an anonymous 64 KiB hostile
// request (hostileShapes: a spread bomb, a list literal, deep nesting,
// many fields) costs a replica — a real process — and how a member's
// `{ me { email } }` fares while four anonymous attackers send them as
// fast as they are answered.
//
// Cost is read from the server process's own /metrics, before and after
// anonCostRequests requests of a shape sent one at a time:
// process_cpu_seconds_total (user and system CPU, the kernel's accounting
// of the process, as getrusage gives it) and go_memstats_alloc_bytes_total
// (every byte the Go runtime allocated); the idle server's own work in the
// same time is included. The member's latency is measured from the
// client, in alternating rounds idle and under attack, so that the
// machine's drift falls on both alike. Run it with `make bench`.
func BenchmarkAnonymousCost(b *testing.B) {
	bin := e2etest.Binary(b)
	w := e2etest.NewWorld(b, bin, "turngate-anon-")
	r := w.Start(b, "anon", "TURNGATE_NO_RUNNER=true")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tok, err := e2etest.TokenFor(bin, w.DataDir, alice)
	if err != nil {
		b.Fatal(err)
	}
	url := r.Base + "/graphql"
	// Bodies are made before anything is measured; each is distinct.
	bodies := make([][][]byte, len(hostileShapes))
	for s, shape := range hostileShapes {
		for i := range anonCostRequests {
			body, err := json.Marshal(shape.Request(s*anonCostRequests+i, server.DefaultMaxQuery))
			if err != nil {
				b.Fatal(err)
			}
			bodies[s] = append(bodies[s], body)
		}
	}
	post := func(body []byte, tok string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("X-Turngate-Identity", tok)
		}
		res, err := servertest.HTTPClient.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		return string(out), err
	}
	// Every hostile request is refused; one that is not fails the run.
	attack := func(s, i int) error {
		out, err := post(bodies[s][i%anonCostRequests], "")
		if err == nil && !strings.Contains(out, `"errors"`) {
			err = fmt.Errorf("%s: not refused: %.200s", hostileShapes[s].Name, out)
		}
		return err
	}

	fmt.Printf("\nanonymous cost: %d requests of each shape, %d bytes of document, one at a time, on a real replica\n", anonCostRequests, server.DefaultMaxQuery)
	var worstCPU time.Duration
	var worstAlloc float64
	for s, shape := range hostileShapes {
		cpu0, alloc0 := serverCost(b, r.Base)
		for i := range anonCostRequests {
			if err := attack(s, i); err != nil {
				b.Fatal(err)
			}
		}
		cpu1, alloc1 := serverCost(b, r.Base)
		cpu := (cpu1 - cpu0) / anonCostRequests
		alloc := (alloc1 - alloc0) / anonCostRequests
		worstCPU, worstAlloc = max(worstCPU, cpu), max(worstAlloc, alloc)
		fmt.Printf("  %-13s %6.3f ms CPU  %7.3f MiB allocated per request\n", shape.Name, ms(cpu), alloc/(1<<20))
	}

	me := func(int, int) error {
		out, err := post([]byte(`{"query":"{ me { email } }"}`), tok)
		if err == nil && !strings.Contains(out, alice) {
			err = fmt.Errorf("me: %.200s", out)
		}
		return err
	}
	for range 50 { // warm the connection, the cache and the pool
		if err := me(0, 0); err != nil {
			b.Fatal(err)
		}
	}
	var idle, attacked []time.Duration
	for range anonRounds {
		lat, _, errs := drive(1, anonRound, me)
		if errs > 0 {
			b.Fatalf("%d member requests failed idle", errs)
		}
		idle = append(idle, lat...)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		var attackErr error
		var once sync.Once
		for a := range anonAttackers {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if err := attack((a+i)%len(hostileShapes), a*anonCostRequests/anonAttackers+i); err != nil {
						once.Do(func() { attackErr = err })
					}
				}
			})
		}
		lat, _, errs = drive(1, anonRound, me)
		close(stop)
		wg.Wait()
		if attackErr != nil {
			b.Fatal(attackErr)
		}
		if errs > 0 {
			b.Fatalf("%d member requests failed under attack", errs)
		}
		attacked = append(attacked, lat...)
	}
	p99Idle, p99Attacked := percentile(idle, 99), percentile(attacked, 99)
	ratio := float64(p99Attacked) / float64(p99Idle)
	b.ReportMetric(ms(worstCPU), "cpu-ms/req")
	b.ReportMetric(worstAlloc/(1<<20), "alloc-MiB/req")
	b.ReportMetric(ratio, "p99-ratio")
	fmt.Printf("  member { me }: p50 %.2f ms, p99 %.2f ms idle (%d requests); p50 %.2f ms, p99 %.2f ms under %d anonymous attackers (%d requests)\n",
		ms(percentile(idle, 50)), ms(p99Idle), len(idle), ms(percentile(attacked, 50)), ms(p99Attacked), anonAttackers, len(attacked))
	fmt.Printf("  goal: <= 5 ms CPU and <= 1 MiB per request, p99 under attack <= 2x idle\n\n")
	fmt.Printf("goal S1 anonymous cost: %.2f ms/%.2f MiB per 64 KiB request, member p99 under attack %.2fx %s\n",
		ms(worstCPU), worstAlloc/(1<<20), ratio, okShort(worstCPU <= 5*time.Millisecond && worstAlloc <= 1<<20 && ratio <= 2))
}

// serverCost reads a replica's CPU time so far and the bytes its Go
// runtime has allocated so far from its /metrics.
func serverCost(b *testing.B, base string) (cpu time.Duration, alloc float64) {
	b.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var gotCPU, gotAlloc bool
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || (name != "process_cpu_seconds_total" && name != "go_memstats_alloc_bytes_total") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		if name == "process_cpu_seconds_total" {
			cpu, gotCPU = time.Duration(v*float64(time.Second)), true
		} else {
			alloc, gotAlloc = v, true
		}
	}
	if !gotCPU || !gotAlloc {
		b.Fatal("/metrics has no process_cpu_seconds_total or go_memstats_alloc_bytes_total")
	}
	return cpu, alloc
}
