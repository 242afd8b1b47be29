package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startPool starts a pool of its own for one test, stopped at cleanup.
func startPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	p := NewPool(cfg)
	t.Cleanup(p.Stop)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls cond every 10ms until it holds, failing the test if it
// does not within the given time.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("after %v: %s", within, what)
		case <-tick.C:
		}
	}
}

// statusField reads one field of /proc/<pid>/status ("" when the process
// is gone).
func statusField(pid int, field string) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// alive reports whether pid is a process that has not exited (a zombie
// has).
func alive(pid int) bool {
	state := statusField(pid, "State")
	return state != "" && !strings.HasPrefix(state, "Z")
}

// rssKiB is pid's resident set size.
func rssKiB(pid int) int64 {
	n, _ := strconv.ParseInt(strings.TrimSuffix(statusField(pid, "VmRSS"), " kB"), 10, 64)
	return n
}

// A script that needs more memory than the pool's budget ends with
// ErrMemory before its wall time, without the calling process growing;
// its worker is replaced and the next run works.
func TestPoolMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, script string }{
		{"huge string", `x = "x" * 1000000000`},
		{"huge list", `x = [0] * 100000000`},
		{"growing list", "x = []\nfor i in range(1000000):\n    x.append('y' * 1000)"},
		{"string doubling", "s = 'x'\nfor i in range(40):\n    s = s + s"},
	} {
		// One at a time: under -race each may take half a gigabyte before
		// the watch ends it.
		t.Run(tt.name, func(t *testing.T) {
			p := startPool(t, PoolConfig{Workers: 1, WallTime: 20 * time.Second})
			before := p.pids()
			idle := anonRSS(before[0])
			peak := sampleRSS(before[0])
			start := time.Now()
			res, err := p.Run(context.Background(), Request{Script: "print('started')\n" + tt.script, Limits: Limits{MaxSteps: 1 << 40}})
			elapsed := time.Since(start)
			if alive(before[0]) {
				t.Errorf("Run returned (%v) and the worker (pid %d) still runs", err, before[0])
			}
			// The watch reads every 2ms; allow a generous 32 MiB of
			// overshoot for the read, the kill and a loaded machine.
			if got, bound := peak(), idle+DefaultMemory*raceShadow+32<<20; got > bound {
				t.Errorf("the worker's RSS reached %d MiB, over its idle %d MiB + budget + 32 MiB", got>>20, idle>>20)
			} else {
				t.Logf("%s: worker RSS idle %d MiB, peak %d MiB (sampled)", tt.name, idle>>20, got>>20)
			}
			// The memory error, not the 20 s wall time, ends it (how soon
			// is a matter of the machine's load: no clock is asserted).
			wantErr(t, err, ErrMemory, "128 MiB")
			if errors.Is(err, ErrWallTime) {
				t.Errorf("ended after %v with %v, want the memory error before the wall time", elapsed, err)
			}
			if res.Output != "" {
				t.Errorf("Output = %q, want nothing from a worker that died", res.Output)
			}
			t.Logf("%s: %v after %v", tt.name, err, elapsed)

			eventually(t, 30*time.Second, "the dead worker was not replaced", func() bool {
				now := p.pids()
				return len(now) == 1 && now[0] != before[0]
			})
			if alive(before[0]) {
				t.Errorf("the worker that ran out of memory (pid %d) still runs", before[0])
			}
			res, err = p.Run(context.Background(), Request{Script: `print(len("x" * 1000000))`})
			if err != nil || res.Output != "1000000\n" {
				t.Fatalf("the next run: %+v, %v", res, err)
			}
		})
	}
}

// sampleRSS samples pid's resident size every millisecond; the function
// it returns stops the sampling and gives the peak. Call it once the run
// has returned: a worker that ended its run broken has been reaped by
// then, and one that did not must not keep the test waiting.
func sampleRSS(pid int) (peak func() int64) {
	stop := make(chan struct{})
	done := make(chan int64, 1)
	go func() {
		var top int64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
	sample:
		for {
			select {
			case <-stop:
				break sample
			case <-tick.C:
			}
			n := anonRSS(pid)
			if n < 0 {
				break
			}
			top = max(top, n)
		}
		done <- top
	}()
	return func() int64 { close(stop); return <-done }
}

// Memory that grows step by step within the address-space limit is
// stopped by the pool's watch of the worker's resident memory, close to
// the budget.
func TestPoolMemoryWatch(t *testing.T) {
	t.Parallel()
	const budget = 16 << 20 // the address-space limit leaves 64 MiB more for thread stacks
	p := startPool(t, PoolConfig{Workers: 1, Memory: budget, WallTime: 20 * time.Second})
	pid := p.pids()[0]
	idle := anonRSS(pid)
	peak := sampleRSS(pid)
	_, err := p.Run(context.Background(), Request{Script: "x = []\nfor i in range(3000):\n    x.append('y' * 100000)"})
	wantErr(t, err, ErrMemory, "16 MiB")
	got := peak()
	if limit := idle + budget*raceShadow; got > limit+16<<20 {
		t.Errorf("the worker's RSS reached %d MiB, over its idle %d MiB + budget + 16 MiB", got>>20, idle>>20)
	}
	t.Logf("worker RSS idle %d MiB, peak %d MiB (sampled), budget %d MiB", idle>>20, got>>20, budget*raceShadow>>20)
}

// A script within its budget runs, and its worker gives the memory back to
// the OS afterwards.
func TestPoolMemoryReturned(t *testing.T) {
	t.Parallel()
	p := startPool(t, PoolConfig{Workers: 1, WallTime: 20 * time.Second})
	pid := p.pids()[0]
	idle := rssKiB(pid)
	res, err := p.Run(context.Background(), Request{Script: `x = "x" * 60000000` + "\nprint(len(x))"})
	if err != nil || res.Output != "60000000\n" {
		t.Fatalf("a 60 MB string within the 128 MiB budget: %+v, %v", res, err)
	}
	peak, _ := strconv.ParseInt(strings.TrimSuffix(statusField(pid, "VmHWM"), " kB"), 10, 64)
	if peak < idle+50<<10 {
		t.Fatalf("peak RSS %d KiB, idle %d KiB: the string was not built", peak, idle)
	}
	if raceShadow > 1 {
		t.Skip("under -race the race runtime keeps the shadow of the freed heap resident")
	}
	eventually(t, 10*time.Second, "the worker kept the memory of its last run", func() bool {
		return rssKiB(pid) < idle+16<<10
	})
	t.Logf("worker RSS: idle %d KiB, peak %d KiB, after %d KiB", idle, peak, rssKiB(pid))
}

// A loop of single steps that each take seconds cannot be interrupted
// between steps in time: the pool kills its worker at the wall time plus
// a grace, and replaces it. (Parsing a 2,000,000-digit int is one step of
// some 7 s, in 30 MB.)
func TestPoolWallTimeStopsLongSteps(t *testing.T) {
	t.Parallel()
	const wall = 500 * time.Millisecond
	p := startPool(t, PoolConfig{Workers: 1, WallTime: wall})
	before := p.pids()
	script := "while True:\n    x = int('9' * 2000000)"
	start := time.Now()
	res, err := p.Run(context.Background(), Request{Script: script})
	elapsed := time.Since(start)
	wantErr(t, err, ErrWallTime, "500ms", "a single step did not end")
	if elapsed < wall || elapsed > wall+killGrace+time.Second {
		t.Errorf("stopped after %v, want within %v + %v grace", elapsed, wall, killGrace)
	}
	t.Logf("stopped after %v: %v (%+v)", elapsed, err, res)
	eventually(t, 30*time.Second, "the killed worker was not replaced", func() bool {
		now := p.pids()
		return len(now) == 1 && now[0] != before[0]
	})
	if res, err := p.Run(context.Background(), Request{Script: "print('next')"}); err != nil || res.Output != "next\n" {
		t.Fatalf("the next run: %+v, %v", res, err)
	}
}

// The caller's context ending stops a script stuck in one long step too,
// within the grace.
func TestPoolContextStopsLongStep(t *testing.T) {
	t.Parallel()
	p := startPool(t, PoolConfig{Workers: 1, WallTime: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Run(ctx, Request{Script: "while True:\n    x = int('9' * 2000000)"})
	elapsed := time.Since(start)
	wantErr(t, err, ErrWallTime, "cancelled")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
	}
	if elapsed > 200*time.Millisecond+killGrace+time.Second {
		t.Errorf("stopped after %v", elapsed)
	}
}

// With one worker and a queue of one, a second run waits and a third is
// refused at once; the waiting one runs when the worker is free.
func TestPoolConcurrencyCap(t *testing.T) {
	t.Parallel()
	p := startPool(t, PoolConfig{Workers: 1, Queue: 1, WallTime: time.Minute})
	spin := Request{Script: "while True:\n    pass", Limits: Limits{MaxSteps: 1 << 62}}

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	doneA := make(chan error, 1)
	go func() { _, err := p.Run(ctxA, spin); doneA <- err }()
	eventually(t, 10*time.Second, "the first run never took the worker", func() bool { return len(p.idle) == 0 })

	type outcome struct {
		res Result
		err error
	}
	doneB := make(chan outcome, 1)
	go func() {
		res, err := p.Run(context.Background(), Request{Script: "print('queued')"})
		doneB <- outcome{res, err}
	}()
	eventually(t, 10*time.Second, "the second run never queued", func() bool { return p.waiting.Load() == 1 })

	start := time.Now()
	_, err := p.Run(context.Background(), Request{Script: "print('third')"})
	wantErr(t, err, ErrBusy, "1 sandbox workers", "1 more are waiting", "try again later")
	if d := time.Since(start); d > time.Second {
		t.Errorf("the refusal took %v, want it at once", d)
	}

	cancelA()
	if err := <-doneA; !errors.Is(err, ErrWallTime) || !errors.Is(err, context.Canceled) {
		t.Errorf("the first run: %v, want cancelled", err)
	}
	if b := <-doneB; b.err != nil || b.res.Output != "queued\n" {
		t.Errorf("the queued run: %+v, %v", b.res, b.err)
	}
}

// A run waiting for a worker gives up when its context ends.
func TestPoolWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	p := startPool(t, PoolConfig{Workers: 1, WallTime: time.Minute})
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	doneA := make(chan error, 1)
	go func() {
		_, err := p.Run(ctxA, Request{Script: "while True:\n    pass", Limits: Limits{MaxSteps: 1 << 62}})
		doneA <- err
	}()
	eventually(t, 10*time.Second, "the first run never took the worker", func() bool { return len(p.idle) == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := p.Run(ctx, Request{Script: "write_file('x', 'ran')"})
	wantErr(t, err, ErrWallTime, "not started", "no sandbox worker was free")
	if !errors.Is(err, context.DeadlineExceeded) || len(res.Files) != 0 {
		t.Errorf("waiting run: %+v, %v", res, err)
	}
	if p.waiting.Load() != 0 {
		t.Errorf("%d runs still counted as waiting", p.waiting.Load())
	}
	cancelA()
	<-doneA
}

// A worker that died while idle (killed from outside) costs the next run
// nothing: it runs on a replacement.
func TestPoolWorkerDiedIdle(t *testing.T) {
	t.Parallel()
	p := startPool(t, PoolConfig{Workers: 1})
	pid := p.pids()[0]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the killed worker never died", func() bool { return !alive(pid) })
	res, err := p.Run(context.Background(), Request{Script: "print('fine')"})
	if err != nil || res.Output != "fine\n" {
		t.Fatalf("Run after the idle worker died: %+v, %v", res, err)
	}
	if now := p.pids(); len(now) != 1 || now[0] == pid {
		t.Errorf("workers %v, want one replacing %d", now, pid)
	}
}

// A lazy pool starts no worker with the pool: a Run starts the worker of
// the slot it takes, and the slots still bound how many workers there are.
func TestPoolLazyStartsWorkersOnFirstUse(t *testing.T) {
	t.Parallel()
	p := startPool(t, PoolConfig{Workers: 2, Lazy: true})
	if now := p.pids(); len(now) != 0 {
		t.Fatalf("a lazy pool started workers %v", now)
	}
	res, err := p.Run(context.Background(), Request{Script: "print('first')"})
	if err != nil || res.Output != "first\n" {
		t.Fatalf("the first Run: %+v, %v", res, err)
	}
	if now := p.pids(); len(now) != 1 {
		t.Fatalf("workers after one Run %v, want one", now)
	}
	for range 3 {
		if _, err := p.Run(context.Background(), Request{Script: "print('again')"}); err != nil {
			t.Fatal(err)
		}
	}
	if now := p.pids(); len(now) != 2 {
		t.Errorf("workers after four Runs %v, want one per slot, 2", now)
	}
}

// Stop kills every worker, busy ones included, and returns once they are
// gone; it is safe twice, and a stopped pool refuses to run.
func TestPoolStopEndsWorkers(t *testing.T) {
	t.Parallel()
	p := startPool(t, PoolConfig{Workers: 3})
	pids := p.pids()
	if len(pids) != 3 {
		t.Fatalf("workers %v, want 3", pids)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("worker %d is not running", pid)
		}
		// A worker is the same binary, marked by its environment only.
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe != mustExe(t) {
			t.Errorf("worker %d runs %q", pid, exe)
		}
	}
	busy := make(chan error, 1)
	go func() {
		_, err := p.Run(context.Background(), Request{Script: "while True:\n    pass", Limits: Limits{MaxSteps: 1 << 62}})
		busy <- err
	}()
	eventually(t, 10*time.Second, "the run never took a worker", func() bool { return len(p.idle) == 2 })

	p.Stop()
	p.Stop()
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("worker %d outlived Stop", pid)
		}
	}
	if left := p.pids(); len(left) != 0 {
		t.Errorf("workers left after Stop: %v", left)
	}
	if err := <-busy; !errors.Is(err, errStopped) {
		t.Errorf("the run in flight: %v, want %v", err, errStopped)
	}
	if _, err := p.Run(context.Background(), Request{Script: "print(1)"}); !errors.Is(err, errStopped) {
		t.Errorf("Run after Stop: %v", err)
	}
	if err := p.Start(context.Background()); err == nil {
		t.Error("Start after Stop succeeded")
	}

	// Stop before Start returns too.
	NewPool(PoolConfig{}).Stop()
}

func mustExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// envHelperParent makes TestPoolHelperParent a pool's owner that a test
// kills with -9.
const envHelperParent = "TURNGATE_SANDBOX_TEST_PARENT"

// TestPoolHelperParent is not a test: run by TestPoolWorkersDieWithParent
// in a process of its own, it starts a pool, prints its workers' ids and
// waits to be killed.
func TestPoolHelperParent(t *testing.T) {
	if os.Getenv(envHelperParent) != "1" {
		t.Skip("a helper process of TestPoolWorkersDieWithParent")
	}
	p := startPool(t, PoolConfig{Workers: 2})
	fmt.Println("pids", strings.Trim(fmt.Sprint(p.pids()), "[]"))
	bufio.NewReader(os.Stdin).ReadString('\n') // until killed
}

// Workers do not outlive a pool owner killed with -9.
func TestPoolWorkersDieWithParent(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(mustExe(t), "-test.run=^TestPoolHelperParent$", "-test.v")
	cmd.Env = append(os.Environ(), envHelperParent+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "pids "); ok {
			for _, f := range strings.Fields(rest) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
			break
		}
	}
	if len(pids) != 2 || !alive(pids[0]) || !alive(pids[1]) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper's workers: %v", pids)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	eventually(t, 10*time.Second, fmt.Sprintf("workers %v outlived their pool's process", pids), func() bool {
		return !slices.ContainsFunc(pids, alive)
	})
}
