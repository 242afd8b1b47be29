package sandbox

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// worker is the pool's handle on one worker process. One Run at a time
// owns it, except kill, which Stop may call from anywhere.
type worker struct {
	cmd *exec.Cmd
	in  *os.File // the worker's stdin
	out *os.File // the worker's stdout
	enc *gob.Encoder
	dec *gob.Decoder
	// sendMu serialises frames on in: a run's cancel is written by a
	// context.AfterFunc goroutine.
	sendMu sync.Mutex
	seq    uint64

	// budget is the memory a run may add (PoolConfig.Memory, scaled under
	// -race); maxRSS is the anonymous resident size at which the pool
	// kills the worker: its idle size, measured at hello, plus budget.
	budget int64
	maxRSS int64

	// stderr is an unlinked temporary file: a healthy worker writes
	// nothing there, a dying one says why. A file, not a pipe, so that no
	// goroutine has to drain it.
	stderr *os.File
	said   string // the head of stderr, read by reap

	killed atomic.Int32 // why the pool killed it: a kill* reason
	reaped sync.Once
}

// errWorkerGone is run's error when the worker could not take the run:
// nothing ran.
var errWorkerGone = errors.New("sandbox: worker gone before the run")

// Why the pool killed a worker. The first reason wins.
const (
	killNone   int32 = iota
	killWall         // it had not answered by its run's deadline
	killStop         // the pool is stopping
	killBroken       // it broke the protocol or its pipes
	killMemory       // its resident memory passed its budget
)

// memPoll is how often the pool reads a busy worker's resident size. A
// script filling memory as fast as it can (some GB/s) overshoots its
// budget by at most what it writes in this time and the kill's latency.
const memPoll = 2 * time.Millisecond

// maxStderr is how much of a worker's stderr the pool reads: the start of
// the runtime's fatal error, which says why it died.
const maxStderr = 8 << 10

// spawn starts a worker process for budget bytes of memory. It does not
// wait for the worker's hello (see hello).
func spawn(budget int64) (_ *worker, err error) {
	path, err := workerPath()
	if err != nil {
		return nil, fmt.Errorf("sandbox: worker binary: %w", err)
	}
	var mine, theirs []*os.File // the pool's ends, the worker's ends
	defer func() {
		for _, f := range theirs {
			f.Close() // the worker has its own copies now (or no one needs them)
		}
		if err != nil {
			for _, f := range mine {
				f.Close()
			}
		}
	}()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: worker pipe: %w", err)
	}
	mine, theirs = append(mine, inW), append(theirs, inR)
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: worker pipe: %w", err)
	}
	mine, theirs = append(mine, outR), append(theirs, outW)
	errF, err := os.CreateTemp("", "turngate-sandbox-*.stderr")
	if err != nil {
		return nil, fmt.Errorf("sandbox: worker stderr: %w", err)
	}
	os.Remove(errF.Name())
	mine = append(mine, errF)

	cmd := &exec.Cmd{
		Path:        path,
		Args:        []string{"turngate-sandbox"},
		Env:         workerEnv(budget),
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errF,
		SysProcAttr: workerAttr(),
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: start worker: %w", err)
	}
	return &worker{cmd: cmd, in: inW, out: outR, enc: gob.NewEncoder(inW), dec: gob.NewDecoder(outR),
		budget: budget * raceShadow, stderr: errF}, nil
}

// workerEnv is a worker's environment: the Go runtime's settings from ours
// (GODEBUG, GORACE, GOCOVERDIR, ...), nothing else. A process that runs
// untrusted scripts has no use for the server's secrets.
//
// MALLOC_ARENA_MAX=1: when cgo is linked in (the server's net and os/user
// are), every OS thread the runtime starts goes through glibc, whose malloc
// reserves a 64 MiB arena per thread; under RLIMIT_AS two or three of
// those ate a worker's whole budget (measured: a 12 MB string failed with
// 20 MB of heap in use).
func workerEnv(budget int64) []string {
	env := []string{envWorker + "=1", envMemory + "=" + strconv.FormatInt(budget, 10), "MALLOC_ARENA_MAX=1"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GO") && !strings.HasPrefix(kv, "GOMAXPROCS=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			env = append(env, kv)
		}
	}
	return env
}

// hello waits for the worker's first frame, by deadline.
func (w *worker) hello(deadline time.Time) error {
	w.out.SetReadDeadline(deadline)
	var rep reply
	if err := w.dec.Decode(&rep); err != nil || rep.Seq != 0 || rep.Limit <= 0 {
		w.kill(killBroken)
		w.reap()
		return fmt.Errorf("sandbox: worker did not start: %v%s", err, say(w.said))
	}
	w.maxRSS = anonRSS(w.cmd.Process.Pid) + w.budget
	return nil
}

// watch kills the worker, as killMemory, once its anonymous resident size
// (anonRSS) passes maxRSS; it reads it every memPoll until stop is
// called. It holds no goroutine between two reads.
func (w *worker) watch() (stop func()) {
	var mu sync.Mutex // guards stopped and t, which the timer's func uses
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(memPoll, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if anonRSS(w.cmd.Process.Pid) > w.maxRSS {
			w.kill(killMemory)
			return
		}
		t.Reset(memPoll)
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// run has the worker run req, whose Limits are final, for a caller whose
// context is ctx. broken reports that the worker is gone (dead, killed,
// or no longer trustworthy) and has been reaped: the pool must replace it.
func (w *worker) run(ctx context.Context, req Request, grace time.Duration, memory int64) (res Result, err error, broken bool) {
	w.seq++
	seq := w.seq
	deadline := time.Now().Add(req.Limits.WallTime + grace)
	w.out.SetReadDeadline(deadline)
	w.in.SetWriteDeadline(deadline)
	if err := w.send(call{Seq: seq, Req: req}); err != nil {
		// It died while idle (an OOM killer, an operator): the script
		// has not started, and may run on another worker.
		w.kill(killBroken)
		w.reap()
		return Result{}, fmt.Errorf("%w: %v%s", errWorkerGone, err, say(w.said)), true
	}

	// The caller's context ending cancels the run in the worker, which
	// then answers at its next step with what the script had done; a
	// worker stuck in one step gets grace to answer before it is killed.
	cancelled := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(cancelled)
		w.send(call{Seq: seq, Cancel: true}) // a dead worker shows in the read
		if soon := time.Now().Add(grace); soon.Before(deadline) {
			w.out.SetReadDeadline(soon)
		}
	})
	unwatch := w.watch()
	var rep reply
	acked := false
	for {
		rep = reply{}
		if err = w.dec.Decode(&rep); err != nil || !rep.Ack || rep.Seq != seq {
			break
		}
		acked = true
	}
	unwatch()
	if !stop() {
		<-cancelled
	}
	switch {
	case err != nil && !acked && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && w.killed.Load() == killNone:
		// It was gone before it took the run (it died while idle, and
		// the send still found its pipe open): the script never
		// started, and may run on another worker.
		w.kill(killBroken)
		w.reap()
		return Result{}, fmt.Errorf("%w: %v%s", errWorkerGone, err, say(w.said)), true
	case err != nil:
		return Result{}, w.lost(ctx, req, grace, memory, err), true
	case rep.Seq != seq:
		return Result{}, w.lost(ctx, req, grace, memory, fmt.Errorf("reply %d to run %d", rep.Seq, seq)), true
	case w.killed.Load() != killNone:
		// Killed just after it answered (by the memory watch, or by
		// Stop): the answer stands, the worker is gone.
		w.reap()
		return rep.Result, rep.Err.err(ctx), true
	}
	return rep.Result, rep.Err.err(ctx), false
}

// send writes one frame to the worker.
func (w *worker) send(c call) error {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	return w.enc.Encode(c)
}

// lost ends a worker that did not answer (err says how the pipe failed):
// it kills it if it still runs, reaps it, and says what happened to the
// run, for the caller whose context is ctx.
func (w *worker) lost(ctx context.Context, req Request, grace time.Duration, memory int64, err error) error {
	timedOut := errors.Is(err, os.ErrDeadlineExceeded)
	switch {
	case timedOut:
		w.kill(killWall)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		// It closed its pipes: it is exiting. Let it finish on its own,
		// so that it says why, but not forever.
		t := time.AfterFunc(grace, func() { w.kill(killBroken) })
		defer t.Stop()
	default:
		w.kill(killBroken)
	}
	state := w.reap()
	why := w.killed.Load()
	switch {
	case why == killStop:
		return errStopped
	case why == killMemory, outOfMemory(w.said), why == killNone && killedByOthers(state):
		// (A SIGKILL says nothing on stderr: what a worker said there
		// is its own reason, whatever the pool sent it afterwards.)
		return fmt.Errorf("%w: the script needed more than the %s of memory a run may use", ErrMemory, formatBytes(memory))
	case timedOut && ctx.Err() != nil:
		return fmt.Errorf("%w: the caller cancelled the run: %w", ErrWallTime, ctx.Err())
	case timedOut:
		return fmt.Errorf("%w: the script ran longer than %v (a single step did not end, so the sandbox stopped it)", ErrWallTime, req.Limits.WallTime)
	}
	return fmt.Errorf("sandbox: worker failed (%v; %v)%s", err, state, say(w.said))
}

// killedByOthers reports whether a worker the pool did not kill died of
// SIGKILL: the kernel's OOM killer, or a container's.
func killedByOthers(state *os.ProcessState) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// kill sends SIGKILL, recording why; safe from any goroutine, at any time.
func (w *worker) kill(why int32) {
	w.killed.CompareAndSwap(killNone, why)
	w.cmd.Process.Kill()
}

// reap waits for the killed or dying worker to exit, releases its pipes
// and reads what it said on stderr; it returns the process state. Only
// the owner calls it; safe to call twice.
func (w *worker) reap() *os.ProcessState {
	w.reaped.Do(func() {
		w.cmd.Wait()
		w.in.Close()
		w.out.Close()
		buf := make([]byte, maxStderr)
		n, _ := w.stderr.ReadAt(buf, 0)
		w.said = string(buf[:n])
		w.stderr.Close()
	})
	return w.cmd.ProcessState
}

// outOfMemory reports whether a worker's death is its memory limit's
// doing, from what it wrote on stderr as it died:
//
//   - the Go runtime's "fatal error: runtime: out of memory", "...:
//     cannot allocate memory", "failed to create new OS thread" or cgo's
//     "pthread_create failed" (RLIMIT_AS counts thread stacks); under
//     -race, the race runtime failing to map memory, or the Go runtime
//     reading its failure to reserve the heap as "too many address space
//     collisions";
//   - a fault inside the runtime's own code (not a Go panic, which starts
//     with "panic:"). The runtime does not check every allocation of its
//     own: Go 1.26's garbage collector dereferences a failed sysAlloc of
//     its span queue, so at the limit a worker may die of SIGSEGV in
//     runtime code instead of reporting out of memory. A worker runs
//     nothing but the interpreter, so a fault in the runtime means the
//     runtime did not get memory.
func outOfMemory(s string) bool {
	for _, oom := range []string{
		"out of memory", "cannot allocate memory", "failed to create new OS thread", "pthread_create failed",
		"ThreadSanitizer failed to allocate", "too many address space collisions for -race mode",
	} {
		if strings.Contains(s, oom) {
			return true
		}
	}
	first, rest, _ := strings.Cut(s, "\n")
	if !strings.HasPrefix(first, "SIGSEGV:") && !strings.HasPrefix(first, "SIGBUS:") &&
		!strings.HasPrefix(first, "fatal error: unexpected signal") && !strings.HasPrefix(first, "unexpected fault address") {
		return false
	}
	// The innermost frame of the first goroutine that faulted.
	_, trace, ok := strings.Cut(rest, "\ngoroutine ")
	if !ok {
		return false
	}
	_, frames, _ := strings.Cut(trace, "\n")
	return strings.HasPrefix(frames, "runtime.")
}

// say is the first line of what a worker wrote on stderr, for an error
// message.
func say(stderr string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	if line == "" {
		return ""
	}
	return ": " + line
}

// formatBytes writes n as MiB when it is a whole number of them.
func formatBytes(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
