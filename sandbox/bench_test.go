package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkTrivialScript measures Run's start-to-result overhead for
// print(1+1): thread setup, parse, compile, execution and the result. It
// runs at least 1000 iterations even under -benchtime 1x, to report p50 and
// p99 (goal: ≤ 1 ms).
func BenchmarkTrivialScript(b *testing.B) {
	ctx := context.Background()
	req := Request{Script: "print(1+1)"}
	n := max(b.N, 1000)
	lat := make([]time.Duration, n)
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := range lat {
		t0 := time.Now()
		res, err := Run(ctx, req)
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
	fmt.Printf("run_code: trivial script start-to-result p50 %.1f µs, p99 %.1f µs (goal ≤ 1 ms)\n", µs(p50), µs(p99))
}
