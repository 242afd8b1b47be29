package sandbox

import (
	"bufio"
	"context"
	"encoding/gob"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
)

// The environment a pool starts a worker with. The worker is the same
// binary as the pool (/proc/self/exe), so this package's init is the
// worker's main, in the server and in every test binary alike.
const (
	envWorker = "TURNGATE_SANDBOX_WORKER"        // "1" in a worker
	envMemory = "TURNGATE_SANDBOX_WORKER_MEMORY" // PoolConfig.Memory, in bytes
)

// workerProcs is the worker's GOMAXPROCS. The interpreter is one
// goroutine; a second P lets the GC and the pipe reader run beside it. More
// would only create OS threads, whose stacks count against RLIMIT_AS.
const workerProcs = 2

// freeSlack is how much the worker's mapped memory may exceed its idle
// figure after a run before it hands the excess back to the OS.
const freeSlack = 8 << 20

func init() {
	if os.Getenv(envWorker) != "1" {
		return
	}
	// Nothing after this package's init runs in a worker: not main, not a
	// test binary's TestMain.
	os.Exit(serveWorker())
}

// serveWorker is a worker process: it limits its own memory, then runs
// the scripts the pool sends on stdin, one at a time, answering on
// stdout. It returns (an exit code) only on a broken pipe; stdin's end,
// the pool closing it or dying, exits at once, even mid-run.
func serveWorker() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "sandbox worker: "+format+"\n", args...)
		return 3
	}
	budget, err := strconv.ParseInt(os.Getenv(envMemory), 10, 64)
	if err != nil || budget <= 0 {
		return fail("%s=%q: want a number of bytes", envMemory, os.Getenv(envMemory))
	}
	// The replies go to a copy of stdout; fd 1 itself becomes stderr, so
	// that nothing else in the binary can write into the protocol.
	out, err := protocolOut()
	if err != nil {
		return fail("%v", err)
	}
	runtime.GOMAXPROCS(min(workerProcs, runtime.NumCPU()))
	lowerPriority()
	limit, err := limitMemory(budget)
	if err != nil {
		return fail("%v", err)
	}
	idle := mappedBytes()
	// The GC works hard before the rlimit is reached: a script that fits
	// runs (slower) instead of crashing. The rlimit, not this, is the
	// bound; this is soft.
	debug.SetMemoryLimit(idle + budget - budget/8)

	enc := gob.NewEncoder(out)
	if err := enc.Encode(reply{Limit: limit}); err != nil {
		return fail("hello: %v", err)
	}

	type job struct {
		call call
		ctx  context.Context
		done context.CancelFunc
	}
	jobs := make(chan job, 1)
	var mu sync.Mutex // guards cur
	var cur job
	go func() {
		dec := gob.NewDecoder(bufio.NewReader(os.Stdin))
		for {
			var c call
			if err := dec.Decode(&c); err != nil {
				// EOF: the pool stopped or died. Anything else is a
				// broken protocol. Either way no one reads our answer.
				os.Exit(0)
			}
			mu.Lock()
			if c.Cancel {
				if cur.call.Seq == c.Seq {
					cur.done()
				}
				mu.Unlock()
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			cur = job{call: c, ctx: ctx, done: cancel}
			mu.Unlock()
			jobs <- cur
		}
	}()

	for j := range jobs {
		if err := enc.Encode(reply{Seq: j.call.Seq, Ack: true}); err != nil {
			return fail("ack: %v", err)
		}
		res, err := execute(j.ctx, j.call.Req)
		j.done()
		if err := enc.Encode(reply{Seq: j.call.Seq, Result: res, Err: toWire(err)}); err != nil {
			return fail("reply: %v", err)
		}
		res = Result{}
		// A run that grew the heap leaves it to the GC's pace; give the
		// pages back now, so an idle worker holds little.
		if mappedBytes() > idle+freeSlack {
			debug.FreeOSMemory()
		}
	}
	return 0
}

// mappedBytes is the memory the Go runtime holds from the OS and has not
// returned to it.
func mappedBytes() int64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
