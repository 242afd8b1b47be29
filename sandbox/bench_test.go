package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkTrivialScript measures run_code's start-to-result overhead for
// print(1+1) through a warm pool: the request's way to a worker process,
// thread setup, parse, compile, execution and the result's way back. It
// runs at least 1000 iterations even under -benchtime 1x, to report p50
// and p99 (goal: p50 ≤ 1 ms). B/op and allocs/op are the calling
// process's only (the worker's are not counted).
func BenchmarkTrivialScript(b *testing.B) {
	ctx := context.Background()
	p := NewPool(PoolConfig{Workers: 1})
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	req := Request{Script: "print(1+1)"}
	// Warm: the worker's first runs pay for its lazy initialisation.
	for range 20 {
		if _, err := p.Run(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	n := max(b.N, 1000)
	lat := make([]time.Duration, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := range lat {
		t0 := time.Now()
		res, err := p.Run(ctx, req)
		lat[i] = time.Since(t0)
		if err != nil || res.Output != "2\n" {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
	total := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)

	slices.Sort(lat)
	p50, p99 := lat[n*50/100], lat[n*99/100]
	µs := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	// Per Run, over all n runs (which may exceed b.N).
	b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n), "B/op")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n), "allocs/op")
	b.ReportMetric(µs(p50), "p50-µs")
	b.ReportMetric(µs(p99), "p99-µs")
	verdict := "ok"
	if p50 > time.Millisecond {
		verdict = "short"
	}
	fmt.Printf("goal P9 run_code warm start-to-result p50 <= 1 ms: p50 %.1f µs, p99 %.1f µs %s\n", µs(p50), µs(p99), verdict)
}
