package runner

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/callback"
	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/internal/startstop"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/metrics"
	"github.com/turngate/turngate/tools"
	"github.com/turngate/turngate/tracing"
)

// Config configures a Runner.
type Config struct {
	Client  *ent.Client
	Hub     *journal.Hub
	Gateway *gateway.Gateway
	// Tools are the tools runs may ask for. Default tools.Default().
	Tools *tools.Registry
	// MaxToolResult bounds, in bytes, what a tool result shows the model.
	// Default 16 KiB.
	MaxToolResult int
	// ToolTimeout bounds one tool call. Default 30s.
	ToolTimeout time.Duration
	// Redactor is applied to every tool result the model reads and to
	// every answer, streamed or final. Default guard.DefaultPatterns().
	Redactor *guard.Redactor
	// MaxRepeats is how often a run may repeat the identical tool call.
	// Default 2.
	MaxRepeats int
	// ApprovalTimeout bounds how long a proposed external effect waits
	// for a member's decision before it expires. Default 10m.
	ApprovalTimeout time.Duration
	// Owner names this runner in leases; unique per process.
	Owner string
	// Metrics counts runs, model steps and tool calls; nil counts
	// nothing.
	Metrics *metrics.Metrics
	// Tracer traces runs, model steps, tool calls and terminals, each
	// run in its turn's trace; nil traces nothing.
	Tracer trace.Tracer
	// LeaseTTL is how long a claim lasts without renewal. Default 30s.
	LeaseTTL time.Duration
	// Heartbeat is how often a run renews its lease. Default LeaseTTL/3.
	Heartbeat time.Duration
	// Poll is the slow sweep for work whose wake-up was lost. Default 1s.
	Poll time.Duration
	// MaxRuns bounds the runs in flight on this runner. Default 64.
	MaxRuns int
	// DeltaWindow and DeltaTokens bound how long and how many tokens model
	// output is held before it is appended as one answer_delta. Defaults
	// 30ms and 64.
	DeltaWindow time.Duration
	DeltaTokens int
	// HistoryTurns is how many earlier turns of the room a run sees.
	// Default 20.
	HistoryTurns int
	// MaxAttempts bounds how often a turn is started; a recovery past it
	// writes a failed terminal instead. Default 3.
	MaxAttempts int
	// Drain is how long Stop lets runs in flight finish before it detaches
	// from them and hands their turns back. Default 10s.
	Drain time.Duration
	// Now is the clock of the turn's runtime context. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Runner claims the heads of room lanes and runs them.
type Runner struct {
	cfg Config
	log *slog.Logger

	startstop.BaseStartStop

	slots chan struct{}
	freed chan struct{} // a run ended: look for work

	cancelRuns context.CancelCauseFunc
	runsCtx    context.Context

	mu       sync.Mutex // guards started, closed, claiming and runs.Add
	started  bool
	closed   bool
	claiming map[uuid.UUID]bool
	// active are the runs going on in this runner, by turn: a takeover of
	// a turn whose own run here outlived its lease supersedes that run.
	active map[uuid.UUID]*activeRun
	runs   sync.WaitGroup

	wmu      sync.Mutex
	watchers map[uuid.UUID]*roomWatch // shared lease watchers, by room

	versions sync.Map // agent version id → *ent.AgentVersion
	store    *lease.Store
	deps     callback.Deps
}

// New returns a runner; Start begins claiming.
func New(cfg Config) *Runner {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = cfg.LeaseTTL / 3
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 64
	}
	if cfg.DeltaWindow <= 0 {
		cfg.DeltaWindow = 30 * time.Millisecond
	}
	if cfg.DeltaTokens <= 0 {
		cfg.DeltaTokens = 64
	}
	if cfg.HistoryTurns <= 0 {
		cfg.HistoryTurns = 20
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tools == nil {
		cfg.Tools = tools.Default()
	}
	if cfg.MaxToolResult <= 0 {
		cfg.MaxToolResult = 16 << 10
	}
	if cfg.ToolTimeout <= 0 {
		cfg.ToolTimeout = 30 * time.Second
	}
	if cfg.Redactor == nil {
		cfg.Redactor, _ = guard.NewRedactor(guard.DefaultPatterns())
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 10 * time.Minute
	}
	if cfg.MaxRepeats <= 0 {
		cfg.MaxRepeats = guard.DefaultMaxRepeats
	}
	if cfg.Owner == "" {
		cfg.Owner = "runner-" + uuid.NewString()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Runner{
		cfg:      cfg,
		log:      cfg.Logger.With("runner", cfg.Owner),
		slots:    make(chan struct{}, cfg.MaxRuns),
		freed:    make(chan struct{}, 1),
		claiming: make(map[uuid.UUID]bool),
		active:   make(map[uuid.UUID]*activeRun),
		watchers: make(map[uuid.UUID]*roomWatch),
		store:    lease.NewStore(cfg.Client, cfg.Hub).WithMetrics(cfg.Metrics),
	}
	r.deps = callback.Deps{
		Client: cfg.Client, Store: r.store, Hub: cfg.Hub, Gateway: cfg.Gateway, Redactor: cfg.Redactor,
		MaxToolResult: cfg.MaxToolResult, ToolTimeout: cfg.ToolTimeout, ApprovalTimeout: cfg.ApprovalTimeout,
		Poll: cfg.Poll, DeltaWindow: cfg.DeltaWindow, DeltaTokens: cfg.DeltaTokens, MaxRepeats: cfg.MaxRepeats,
		Owner: cfg.Owner, Now: cfg.Now, Logger: r.log, AgentVersion: r.agentVersion, Metrics: cfg.Metrics,
		Tracer: tracing.Or(cfg.Tracer),
	}
	return r
}

// Owner is the name this runner writes into its leases.
func (r *Runner) Owner() string { return r.cfg.Owner }

// Start begins claiming lane heads in the background.
func (r *Runner) Start(ctx context.Context) error {
	loopCtx, ok, stopped := r.StartInit(ctx)
	if !ok {
		return errors.New("runner already started")
	}
	// Runs get a context of their own: stopping the loop must not be
	// mistaken for anything a run should act on but detaching.
	runsCtx, cancelRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.cancelRuns, r.runsCtx = cancelRuns, runsCtx
	r.started = true
	r.mu.Unlock()
	go func() {
		defer stopped()
		r.loop(loopCtx, runsCtx)
		r.drain()
	}()
	return nil
}

// Stop is an orderly termination: the runner stops claiming, gives the
// runs in flight a bounded drain (Drain) to finish, then detaches from the
// rest — their turns go back to the lane, fenced, for another runner to
// take at once — and waits for them. Safe to call twice, and before Start.
func (r *Runner) Stop() { r.BaseStartStop.Stop() }

// drain waits for the runs in flight, up to the drain period, then
// detaches from those still running.
func (r *Runner) drain() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	finished := make(chan struct{})
	go func() { r.runs.Wait(); close(finished) }()
	t := time.NewTimer(r.cfg.Drain)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		r.cancelRuns(errDetached)
		<-finished
	}
	r.cancelRuns(errDetached)
}

func (r *Runner) loop(ctx, runsCtx context.Context) {
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for {
		wake := r.cfg.Hub.WaitAny()
		if err := r.claimHeads(ctx, runsCtx, r.freed); err != nil && ctx.Err() == nil {
			r.log.Warn("claiming lane heads failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-r.freed:
		case <-tick.C:
			// The slow sweep: runs whose owner died with nobody coming
			// back for them.
			if err := r.salvage(ctx, runsCtx, r.freed); err != nil && ctx.Err() == nil {
				r.log.Warn("salvaging expired runs failed", "err", err)
			}
		}
	}
}

func (r *Runner) claimHeads(ctx, runsCtx context.Context, freed chan<- struct{}) error {
	free := cap(r.slots) - len(r.slots)
	if free == 0 {
		return nil
	}
	heads, err := r.store.LaneHeads(ctx, lease.LaneHeadsParams{Max: free})
	if err != nil {
		return err
	}
	// Claims run concurrently, each in its own slot: they commit together
	// (one group commit) instead of queueing behind one another.
	for _, id := range heads {
		if !r.reserve(id) {
			continue // full, stopping, or already being claimed here
		}
		go func() {
			defer r.unreserve(id, freed)
			c, err := r.store.Claim(ctx, lease.ClaimParams{TurnID: id, Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL})
			switch {
			case errors.Is(err, lease.ErrNotClaimable):
				// Another runner was faster, or the lane moved.
			case err != nil:
				if ctx.Err() == nil {
					r.log.Warn("claiming a lane head failed", "turn", id, "err", err)
				}
			default:
				r.run(runsCtx, c)
			}
		}()
	}
	return nil
}

// reserve takes a slot for claiming and running turn id, unless the
// runner is full or stopping, or already claims that turn.
func (r *Runner) reserve(id uuid.UUID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.closed || r.claiming[id] {
		return false
	}
	select {
	case r.slots <- struct{}{}:
	default:
		return false
	}
	r.claiming[id] = true
	r.runs.Add(1)
	return true
}

// activeRun is a run going on in this runner: its cancel, and done,
// closed once its slot is given back.
type activeRun struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// unreserve gives back what reserve took and wakes the loop.
func (r *Runner) unreserve(id uuid.UUID, freed chan<- struct{}) {
	r.mu.Lock()
	delete(r.claiming, id)
	a := r.active[id]
	delete(r.active, id)
	r.mu.Unlock()
	<-r.slots
	if a != nil {
		close(a.done)
	}
	r.runs.Done()
	select {
	case freed <- struct{}{}:
	default:
	}
}

// ClaimAccepted is the accept-time claim (turn.Starter): when this runner
// has a free slot, it reserves it and claims t in tx, the transaction that
// accepts t into an idle lane (see lease.Store.ClaimAccepted). It reports
// false, having changed nothing, when the runner is full or stopping, or
// when the claim is refused because an earlier turn holds the lane: t
// stays queued, and the claim loop takes the lane in order. After the
// commit the caller calls StartClaimed, or Unclaim when the transaction
// did not commit.
func (r *Runner) ClaimAccepted(ctx context.Context, tx *sql.Tx, t *ent.Turn, agentVersion int) (*lease.Claimed, bool, error) {
	if !r.reserve(t.ID) {
		return nil, false, nil
	}
	c, err := r.store.ClaimAccepted(ctx, tx, lease.ClaimAcceptedParams{Turn: t, AgentVersion: agentVersion, Owner: r.cfg.Owner, TTL: r.cfg.LeaseTTL})
	switch {
	case errors.Is(err, lease.ErrNotClaimable):
		r.unreserve(t.ID, r.freed)
		return nil, false, nil
	case err != nil:
		r.unreserve(t.ID, r.freed)
		return nil, false, err
	}
	return c, true, nil
}

// StartClaimed runs a turn ClaimAccepted claimed, once its transaction
// committed, in the slot ClaimAccepted reserved.
func (r *Runner) StartClaimed(c *lease.Claimed) {
	go func() {
		defer r.unreserve(c.Turn.ID, r.freed)
		r.run(r.runsCtx, c)
	}()
}

// Unclaim gives back the slot of a ClaimAccepted whose transaction did
// not commit.
func (r *Runner) Unclaim(c *lease.Claimed) { r.unreserve(c.Turn.ID, r.freed) }
