package server_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/pgembed"
	"github.com/turngate/turngate/server"
)

// BenchmarkScaling is the measured part of docs/scaling.md: the closed
// loop of BenchmarkTurnsVersusRiver (32 members each keeping one turn in
// flight over 100 rooms, the instant builtin model, synchronous_commit
// on) against one Postgres with 1, 2 and 3 replicas, each sized so all
// fit Postgres's 100 connections. It prints completed turns per second,
// accept p50/p99, the connections each replica held, and how busy the
// machine's two cores were: the bottleneck.
func BenchmarkScaling(b *testing.B) {
	pg := dbtest.StartServer(b, pgembed.Options{Durable: true})
	ctx := context.Background()
	fmt.Printf("\nscaling: %d clients, one turn in flight each, %s per step, one Postgres (max_connections 100), 2 cores\n", benchSubmitters, benchDuration)
	fmt.Printf("  %-10s %8s %9s %9s %12s %10s\n", "replicas", "turns/s", "acc50 ms", "acc99 ms", "conns/replica", "cpu busy")
	for _, n := range []int{1, 2, 3} {
		db := fmt.Sprintf("bench_scale_%d", n)
		if err := server.EnsureDatabase(ctx, pg.URL("postgres"), db); err != nil {
			b.Fatal(err)
		}
		// Each replica's pool plus its listener, and the measuring pool,
		// under the 97 slots Postgres leaves clients.
		pool := min(64, (97-benchMeasurePool)/n-1)
		// A sub-benchmark per step: its replicas stop (and free their
		// connections) before the next step starts.
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			busy0 := cpuBusy(b)
			r, conns := measureTurnsOn(b, pg.URL(db), n, pool, benchSubmitters)
			busy := cpuBusy(b).since(busy0)
			fmt.Printf("  %-10d %8.0f %9.2f %9.2f %8d of %2d %9.0f%%\n", n, r.rate, r.p(r.accept, 50), r.p(r.accept, 99), conns, pool, 100*busy)
			b.ReportMetric(r.rate, "turns/s")
		})
	}
}

// cpuSample is the machine's CPU time from /proc/stat: busy and total
// jiffies over all cores.
type cpuSample struct{ busy, total float64 }

func cpuBusy(b *testing.B) cpuSample {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	var s cpuSample
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		s.total += v
		if i != 3 && i != 4 { // idle, iowait
			s.busy += v
		}
	}
	return s
}

// since is the busy share of the CPU time between a and s.
func (s cpuSample) since(a cpuSample) float64 {
	if s.total == a.total {
		return 0
	}
	return (s.busy - a.busy) / (s.total - a.total)
}

// cpuWindow is the CPU a measured window cost: the machine's (every
// process: the benchmark's, PostgreSQL's, the rest) and this process's own
// (the in-process replicas, their clients, the measuring side).
type cpuWindow struct {
	machine cpuSample
	self    time.Duration
}

func startCPU(b *testing.B) cpuWindow { return cpuWindow{machine: cpuBusy(b), self: selfCPU(b)} }

// per reports the window's CPU so far per unit of work, n units: the
// machine's and this process's, in ms.
func (w cpuWindow) per(b *testing.B, n int) (machine, self float64) {
	if n == 0 {
		return 0, 0
	}
	now := cpuBusy(b)
	busy := (now.busy - w.machine.busy) / clockTicks // jiffies to seconds
	return 1000 * busy / float64(n), ms(selfCPU(b)-w.self) / float64(n)
}

// clockTicks is USER_HZ, the unit of /proc/stat (100 on Linux).
const clockTicks = 100

// selfCPU is this process's user and system CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
