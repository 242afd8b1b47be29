package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of PoolConfig, used for every field that is zero.
const (
	DefaultWorkers = 4
	DefaultQueue   = 64
	DefaultMemory  = 128 << 20
)

// killGrace is how long past a run's wall time (or its caller's context
// ending) the pool waits for the worker's answer before it kills the
// worker. The worker stops the script itself at the wall time, between two
// steps; grace covers the reply's way back, not another step.
const killGrace = 250 * time.Millisecond

// helloTimeout bounds a new worker's start: the binary's package
// initialisation, then its hello.
const helloTimeout = 30 * time.Second

// errStopped is Run's error once Stop has begun.
var errStopped = errors.New("sandbox: the pool is stopped")

// PoolConfig bounds a Pool. A zero field means its default.
type PoolConfig struct {
	// Workers is the number of worker processes, which is the number of
	// scripts running at once; default 4.
	Workers int
	// Queue bounds the runs waiting for a worker; past it Run refuses at
	// once with ErrBusy. Default 64; negative: no run waits.
	Queue int
	// Memory bounds what one run may add to its worker process's idle
	// footprint, in bytes: its resident memory, and (with room for thread
	// stacks) its address space; default 128 MiB. A script that needs
	// more ends with ErrMemory.
	Memory int64
	// WallTime is the default and the most a Request's Limits.WallTime
	// may ask for; default 2s.
	WallTime time.Duration
	// Lazy starts no worker in Start: each slot starts its worker when a
	// Run first takes it, so a process that never runs a script holds no
	// workers, and the first scripts pay a worker's start.
	Lazy bool
}

func (c PoolConfig) withDefaults() PoolConfig {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	switch {
	case c.Queue == 0:
		c.Queue = DefaultQueue
	case c.Queue < 0:
		c.Queue = 0
	}
	if c.Memory <= 0 {
		c.Memory = DefaultMemory
	}
	if c.WallTime <= 0 {
		c.WallTime = DefaultWallTime
	}
	return c
}

// Pool runs scripts in a fixed set of worker processes (see the package
// documentation). Start it before Run; Stop ends every worker.
type Pool struct {
	cfg PoolConfig

	// idle holds one entry per worker slot not owned by a Run: a running
	// worker, or nil for a slot whose worker must be started (its
	// predecessor died, or could not be started).
	idle    chan *worker
	waiting atomic.Int64 // Runs waiting for a slot

	mu       sync.Mutex
	started  bool
	live     map[*worker]struct{} // started and not yet reaped; Stop kills them
	stopping chan struct{}        // closed when Stop begins

	respawns sync.WaitGroup // goroutines starting replacements
	stopOnce sync.Once
	stopped  chan struct{} // closed when Stop has finished
}

// NewPool returns a pool for cfg; Start starts its workers.
func NewPool(cfg PoolConfig) *Pool {
	cfg = cfg.withDefaults()
	return &Pool{
		cfg:      cfg,
		idle:     make(chan *worker, cfg.Workers),
		live:     map[*worker]struct{}{},
		stopping: make(chan struct{}),
		stopped:  make(chan struct{}),
	}
}

// Config is the pool's configuration, defaults filled in.
func (p *Pool) Config() PoolConfig { return p.cfg }

// Start starts the workers and waits for each to be ready, within ctx. A
// pool starts once; on an error, Stop still ends the workers that did
// start.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	select {
	case <-p.stopping:
		p.mu.Unlock()
		return errStopped
	default:
	}
	if p.started {
		p.mu.Unlock()
		return errors.New("sandbox: pool already started")
	}
	p.started = true
	p.mu.Unlock()

	if p.cfg.Lazy {
		for range p.cfg.Workers {
			p.idle <- nil // started by the Run that takes the slot
		}
		return nil
	}
	// Start them all, then wait: they initialise in parallel.
	ws := make([]*worker, p.cfg.Workers)
	var first error
	for i := range ws {
		w, err := p.spawn()
		if err != nil && first == nil {
			first = err
		}
		ws[i] = w
	}
	deadline := helloDeadline(ctx)
	for _, w := range ws {
		if w != nil {
			if err := p.hello(w, deadline); err != nil {
				w = nil
				if first == nil {
					first = err
				}
			}
		}
		// A slot without a worker starts one when a Run takes it.
		p.idle <- w
	}
	return first
}

// helloDeadline is when a worker started for ctx must be ready.
func helloDeadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(helloTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return deadline
}

// spawn starts a worker process and registers it, so Stop kills it.
func (p *Pool) spawn() (*worker, error) {
	w, err := spawn(p.cfg.Memory)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.live[w] = struct{}{}
	p.mu.Unlock()
	return w, nil
}

// hello waits for w to be ready, reaping it if it does not come up.
func (p *Pool) hello(w *worker, deadline time.Time) error {
	err := w.hello(deadline)
	if err != nil {
		p.forget(w)
	}
	return err
}

// forget unregisters a reaped worker.
func (p *Pool) forget(w *worker) {
	p.mu.Lock()
	delete(p.live, w)
	p.mu.Unlock()
}

// Stop kills every worker, the busy ones included (their Runs return an
// error), and waits until they have exited. Safe to call twice, and
// before Start.
func (p *Pool) Stop() {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		close(p.stopping)
		started := p.started
		for w := range p.live {
			w.kill(killStop) // a busy one's Run returns errStopped
		}
		p.mu.Unlock()
		if started {
			// Every slot comes back: from a Run that ends, or from a
			// respawn (which may have started one more worker).
			for range p.cfg.Workers {
				if w := <-p.idle; w != nil {
					w.kill(killStop)
					w.reap()
					p.forget(w)
				}
			}
		}
		p.respawns.Wait()
		close(p.stopped)
	})
	<-p.stopped
}

// Run runs req in a worker and returns what the script printed and wrote.
//
// Request problems are reported before anything runs: an input with a bad
// digest (ErrInputDigest), and an input with an invalid or duplicate name
// (a plain error: that is the caller's mistake, not the script's). When no
// worker is free, Run waits for one while ctx lasts (ErrWallTime, wrapping
// ctx.Err(), when it ends first), unless PoolConfig.Queue runs already
// wait (ErrBusy). After the script has started, an error wraps one of
// ErrSteps, ErrOutput, ErrWallTime, ErrScript, ErrRefused or ErrMemory;
// except after ErrMemory or a script stopped in the middle of one step,
// the Result still holds the output, files and steps produced before the
// script stopped.
//
// Run is safe for concurrent use.
func (p *Pool) Run(ctx context.Context, req Request) (Result, error) {
	if req.Limits.WallTime <= 0 || req.Limits.WallTime > p.cfg.WallTime {
		req.Limits.WallTime = p.cfg.WallTime
	}
	req.Limits = req.Limits.withDefaults()
	if _, err := checkInputs(req.Inputs); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%w: not started: %w", ErrWallTime, err)
	}
	// A worker found dead when the run is handed to it (it died while
	// idle) costs one more try, on the next worker.
	for try := 0; ; try++ {
		w, err := p.acquire(ctx)
		if err != nil {
			return Result{}, err
		}
		res, err, broken := w.run(ctx, req, killGrace, p.cfg.Memory)
		p.release(w, broken)
		if !errors.Is(err, errWorkerGone) || try == 1 {
			return res, err
		}
	}
}

// acquire takes a worker slot, waiting for one if the queue allows, and
// starts the slot's worker if it has none.
func (p *Pool) acquire(ctx context.Context) (*worker, error) {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !started {
		return nil, errors.New("sandbox: the pool is not started")
	}
	var w *worker
	select {
	case <-p.stopping:
		return nil, errStopped
	case w = <-p.idle:
	default:
		if n := p.waiting.Add(1); n > int64(p.cfg.Queue) {
			p.waiting.Add(-1)
			return nil, fmt.Errorf("%w: all %d sandbox workers are running scripts and %d more are waiting; try again later",
				ErrBusy, p.cfg.Workers, p.cfg.Queue)
		}
		var err error
		select {
		case w = <-p.idle:
		case <-ctx.Done():
			err = fmt.Errorf("%w: not started: no sandbox worker was free: %w", ErrWallTime, ctx.Err())
		case <-p.stopping:
			err = errStopped
		}
		p.waiting.Add(-1)
		if err != nil {
			return nil, err
		}
	}
	if w == nil {
		var err error
		if w, err = p.start(ctx); err != nil {
			p.idle <- nil
			return nil, err
		}
	}
	select {
	case <-p.stopping:
		p.idle <- w // Stop collects it
		return nil, errStopped
	default:
	}
	return w, nil
}

// start starts one worker and waits for it to be ready.
func (p *Pool) start(ctx context.Context) (*worker, error) {
	w, err := p.spawn()
	if err != nil {
		return nil, err
	}
	if err := p.hello(w, helloDeadline(ctx)); err != nil {
		return nil, err
	}
	return w, nil
}

// release gives a Run's slot back: its worker, or, when the worker is
// gone, a replacement started in the background.
func (p *Pool) release(w *worker, broken bool) {
	if !broken {
		p.idle <- w
		return
	}
	p.forget(w) // run reaped it
	// The slot is not back yet, so Stop is still waiting for it: Add
	// happens before Stop's Wait.
	p.respawns.Go(func() {
		var next *worker
		select {
		case <-p.stopping:
		default:
			next, _ = p.start(context.Background()) // on failure the next acquire tries again
		}
		p.idle <- next
	})
}

// pids are the ids of the worker processes the pool has started and not
// yet reaped, for tests.
func (p *Pool) pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for w := range p.live {
		pids = append(pids, w.cmd.Process.Pid)
	}
	return pids
}
