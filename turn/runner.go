package turn

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/ent"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/guard"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/tools"
)

// RunnerConfig configures a Runner.
type RunnerConfig struct {
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
	cfg RunnerConfig
	log *slog.Logger

	slots chan struct{}
	freed chan struct{} // a run ended: look for work

	startOnce, stopOnce sync.Once
	cancelLoop          context.CancelFunc
	cancelRuns          context.CancelCauseFunc
	runsCtx             context.Context
	done                chan struct{}

	mu       sync.Mutex // guards started, closed, claiming and runs.Add
	started  bool
	closed   bool
	claiming map[uuid.UUID]bool
	runs     sync.WaitGroup

	versions sync.Map // agent version id → *ent.AgentVersion
}

// NewRunner returns a runner; Start begins claiming.
func NewRunner(cfg RunnerConfig) *Runner {
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
	return &Runner{
		cfg:      cfg,
		log:      cfg.Logger.With("runner", cfg.Owner),
		slots:    make(chan struct{}, cfg.MaxRuns),
		freed:    make(chan struct{}, 1),
		done:     make(chan struct{}),
		claiming: make(map[uuid.UUID]bool),
	}
}

// Owner is the name this runner writes into its leases.
func (r *Runner) Owner() string { return r.cfg.Owner }

// Start begins claiming lane heads in the background.
func (r *Runner) Start(ctx context.Context) error {
	started := false
	r.startOnce.Do(func() {
		started = true
		// Runs get a context of their own: stopping the loop must not be
		// mistaken for anything a run should act on but detaching.
		runsCtx, cancelRuns := context.WithCancelCause(context.WithoutCancel(ctx))
		loopCtx, cancelLoop := context.WithCancel(ctx)
		r.mu.Lock()
		r.cancelRuns, r.cancelLoop, r.runsCtx = cancelRuns, cancelLoop, runsCtx
		r.started = true
		r.mu.Unlock()
		go func() {
			defer close(r.done)
			r.loop(loopCtx, runsCtx)
			r.drain()
		}()
	})
	if !started {
		return errors.New("runner already started")
	}
	return nil
}

// Stop is an orderly termination: the runner stops claiming, gives the
// runs in flight a bounded drain (Drain) to finish, then detaches from the
// rest — their turns go back to the lane, fenced, for another runner to
// take at once — and waits for them. Safe to call twice, and before Start.
func (r *Runner) Stop() {
	r.stopOnce.Do(func() {
		r.startOnce.Do(func() { close(r.done) })
		if r.cancelLoop != nil {
			r.cancelLoop()
		}
	})
	<-r.done
}

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

// lane heads: per room with no active turn, its queued turn with the
// lowest position.
const laneHeads = `
SELECT DISTINCT ON (t.conversation_id) t.id
FROM turns t JOIN conversations c ON c.id = t.conversation_id
WHERE t.state = 'queued' AND c.active_turn_id IS NULL
ORDER BY t.conversation_id, t.position
LIMIT $1`

func (r *Runner) claimHeads(ctx, runsCtx context.Context, freed chan<- struct{}) error {
	free := cap(r.slots) - len(r.slots)
	if free == 0 {
		return nil
	}
	heads, err := pg.QueryIDs(ctx, r.cfg.Client, laneHeads, free)
	if err != nil {
		return fmt.Errorf("lane heads: %w", err)
	}
	// Claims run concurrently, each in its own slot: they commit together
	// (one group commit) instead of queueing behind one another.
	for _, id := range heads {
		if !r.reserve(id) {
			continue // full, stopping, or already being claimed here
		}
		go func() {
			defer r.unreserve(id, freed)
			c, err := Claim(ctx, r.cfg.Client, r.cfg.Hub, id, r.cfg.Owner, r.cfg.LeaseTTL)
			switch {
			case errors.Is(err, ErrNotClaimable):
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

// unreserve gives back what reserve took and wakes the loop.
func (r *Runner) unreserve(id uuid.UUID, freed chan<- struct{}) {
	r.mu.Lock()
	delete(r.claiming, id)
	r.mu.Unlock()
	<-r.slots
	r.runs.Done()
	select {
	case freed <- struct{}{}:
	default:
	}
}

// claimAccepted claims a turn in the transaction that accepts it, for a
// lane the accepting statement found idle (no active turn, nothing queued
// or running) under the room's row lock. The same fenced updates as Claim
// apply, and the partial unique index still has the last word.
func (r *Runner) claimAccepted(ctx context.Context, tx *sql.Tx, t *ent.Turn, agentVersion int) (*Claimed, error) {
	var token int64
	if err := tx.QueryRowContext(ctx, `UPDATE turns SET state = 'running', lease_token = lease_token + 1, lease_owner = $2,
  lease_expires_at = now() + make_interval(secs => $3), attempt = attempt + 1, started_at = now()
WHERE id = $1 AND state = 'queued' RETURNING lease_token`, t.ID, r.cfg.Owner, r.cfg.LeaseTTL.Seconds()).Scan(&token); err != nil {
		return nil, fmt.Errorf("claim at acceptance: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE conversations SET active_turn_id = $2 WHERE id = $1 AND active_turn_id IS NULL`, t.ConversationID, t.ID); err != nil {
		return nil, fmt.Errorf("claim at acceptance: %w", err)
	}
	fence := journal.Fence{TurnID: t.ID, LeaseToken: token}
	started := *t
	started.State, started.Attempt, started.LeaseToken = "running", 1, token
	if _, err := journal.Append(ctx, tx, t.ConversationID, &fence, journal.Draft{
		Kind: journal.KindTurnStarted, TurnID: uuid.NullUUID{UUID: t.ID, Valid: true}, Attempt: 1,
		Payload: journal.StartedPayload{Attempt: 1, AgentVersion: agentVersion, Runner: r.cfg.Owner},
	}); err != nil {
		return nil, fmt.Errorf("claim at acceptance: %w", err)
	}
	return &Claimed{Turn: &started, Fence: fence}, nil
}

// runReserved runs a turn claimed in a slot reserve already took.
func (r *Runner) runReserved(c *Claimed) {
	go func() {
		defer r.unreserve(c.Turn.ID, r.freed)
		r.run(r.runsCtx, c)
	}()
}

// start runs a turn already claimed (a recovery) in its own goroutine, in
// a slot. A runner that is stopping or full starts nothing: the claim is
// handed back for another runner to take at once.
func (r *Runner) start(runsCtx context.Context, c *Claimed, freed chan<- struct{}) {
	if !r.reserve(c.Turn.ID) {
		if err := Release(context.Background(), r.cfg.Client, r.cfg.Hub, c.Fence); err != nil && !errors.Is(err, ErrFenced) {
			r.log.Warn("handing back a claim", "turn", c.Turn.ID, "err", err)
		}
		return
	}
	go func() {
		defer r.unreserve(c.Turn.ID, freed)
		r.run(runsCtx, c)
	}()
}

// Claimed is a run's hold on a turn.
type Claimed struct {
	Turn  *ent.Turn
	Fence journal.Fence
}

// ErrNotClaimable reports a turn that is not the claimable head of its
// lane (it is running, finished, behind another turn, or the room is busy).
var ErrNotClaimable = errors.New("turn is not the claimable head of its lane")

// claimTurn moves the head of a lane to running. The NOT EXISTS keeps the
// lane first-in-first-out; the partial unique index on running turns keeps
// one running per room if anything else ever tried.
const claimTurn = `
UPDATE turns t SET state = 'running', lease_token = lease_token + 1, lease_owner = $2,
  lease_expires_at = now() + make_interval(secs => $3), attempt = attempt + 1,
  started_at = COALESCE(started_at, now())
WHERE t.id = $1 AND t.state = 'queued'
  AND NOT EXISTS (SELECT 1 FROM turns e WHERE e.conversation_id = t.conversation_id
                  AND e.state IN ('queued', 'running') AND e.position < t.position)
RETURNING lease_token`

// Claim takes a queued turn that heads its lane, for owner, and appends
// turn_started. It returns ErrNotClaimable when the turn is not that.
func Claim(ctx context.Context, client *ent.Client, hub *journal.Hub, turnID uuid.UUID, owner string, ttl time.Duration) (*Claimed, error) {
	tx, err := client.Tx(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim %s: begin: %w", turnID, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, claimTurn, turnID, owner, ttl.Seconds())
	if err != nil {
		if pg.IsUniqueViolation(err) {
			return nil, ErrNotClaimable
		}
		return nil, fmt.Errorf("claim %s: %w", turnID, err)
	}
	var token int64
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&token); err != nil {
			rows.Close()
			return nil, err
		}
	}
	if err := pg.CloseRows(rows); err != nil {
		if pg.IsUniqueViolation(err) {
			return nil, ErrNotClaimable
		}
		return nil, fmt.Errorf("claim %s: %w", turnID, err)
	}
	if !found {
		return nil, ErrNotClaimable
	}
	t, err := tx.Turn.Get(ctx, turnID)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", turnID, err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE conversations SET active_turn_id = $2 WHERE id = $1 AND active_turn_id IS NULL`, t.ConversationID, turnID)
	if err != nil {
		return nil, fmt.Errorf("claim %s: activate room: %w", turnID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, ErrNotClaimable
	}
	// The bundle pinned the agent version at acceptance.
	var pinned struct {
		AgentVersion int `json:"agentVersion"`
	}
	if err := json.Unmarshal(t.AuthorityBundle, &pinned); err != nil {
		return nil, fmt.Errorf("claim %s: authority bundle: %w", turnID, err)
	}
	fence := journal.Fence{TurnID: turnID, LeaseToken: token}
	entries, err := journal.Append(ctx, tx, t.ConversationID, &fence, journal.Draft{
		Kind: journal.KindTurnStarted, TurnID: uuid.NullUUID{UUID: turnID, Valid: true}, Attempt: t.Attempt,
		Payload: journal.StartedPayload{Attempt: t.Attempt, AgentVersion: pinned.AgentVersion, Runner: owner},
	})
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", turnID, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("claim %s: commit: %w", turnID, err)
	}
	hub.Committed(t.ConversationID, entries[0].Seq)
	return &Claimed{Turn: t, Fence: fence}, nil
}
