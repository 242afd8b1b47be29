package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/internal/startstop"
	"github.com/turngate/turngate/pg"
)

// Channel is the Postgres NOTIFY channel carrying journal heads.
const Channel = "turngate_journal"

// HubConfig configures a Hub.
type HubConfig struct {
	// DB sends the NOTIFYs.
	DB pg.Querier
	// ListenURL is the connection string for the replica's one LISTEN
	// connection. Empty: no cross-replica wake-ups (a single process).
	ListenURL string
	// Debounce gathers commits into one NOTIFY. Default 5ms.
	Debounce time.Duration
	// Poll is the slow tick on which every reader re-reads anyway, so a
	// lost notification only delays. Default 2s.
	Poll   time.Duration
	Logger *slog.Logger
}

// Hub wakes the readers of a replica when a room's journal moves. It never
// carries entries: readers read them from the database (see the package
// documentation). Publishing never blocks.
type Hub struct {
	cfg HubConfig
	log *slog.Logger

	rooms    waker // by room: woken when the room's journal moves
	commands *Commands

	mu      sync.Mutex
	any     chan struct{}       // closed when any room moves
	pending map[uuid.UUID]int64 // heads not yet NOTIFYed
	heads   map[uuid.UUID]int64 // the newest head this hub has heard of, by room
	kick    chan struct{}

	startstop.BaseStartStop
}

// NewHub returns a Hub; Start runs its notifier and listener.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Debounce <= 0 {
		cfg.Debounce = 5 * time.Millisecond
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Hub{
		cfg:     cfg,
		log:     cfg.Logger,
		any:     make(chan struct{}),
		pending: make(map[uuid.UUID]int64),
		heads:   make(map[uuid.UUID]int64),
		kick:    make(chan struct{}, 1),
	}
	h.commands = &Commands{pending: make(map[uuid.UUID]bool), kick: h.kickNotify}
	return h
}

// Wait returns a channel that is closed the next time the room's journal
// moves (or on a poll tick or listener reconnect). Take it before reading,
// so a commit between the read and the wait is not missed.
func (h *Hub) Wait(room uuid.UUID) <-chan struct{} { return h.rooms.wait(room) }

// WaitAny returns a channel closed the next time any room moves.
func (h *Hub) WaitAny() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.any
}

// Committed reports that room's journal now reaches head. Call it after the
// appending transaction committed: it wakes this replica's readers at once
// and schedules a debounced NOTIFY for the others.
func (h *Hub) Committed(room uuid.UUID, head int64) {
	h.wake(room)
	h.mu.Lock()
	if head > h.pending[room] {
		h.pending[room] = head
	}
	h.heard(room, head)
	h.mu.Unlock()
	h.kickNotify()
}

// kickNotify schedules a debounced NOTIFY.
func (h *Hub) kickNotify() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Commands is the replica's turn-command waker, which shares the hub's
// notification channel.
func (h *Hub) Commands() *Commands { return h.commands }

func (h *Hub) wake(room uuid.UUID) {
	h.rooms.wake(room)
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.any)
	h.any = make(chan struct{})
}

// wakeAll makes every reader re-read: after a listener reconnect or on the
// poll tick, when notifications may have been lost.
func (h *Hub) wakeAll() {
	h.rooms.wakeAll()
	h.commands.waiters.wakeAll()
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.any)
	h.any = make(chan struct{})
}

// Start runs the notifier, the listener (when ListenURL is set) and the
// poll tick until Stop.
func (h *Hub) Start(ctx context.Context) error {
	ctx, ok, stopped := h.StartInit(ctx)
	if !ok {
		return fmt.Errorf("journal hub already started")
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.notifyLoop(ctx) }()
	go func() { defer wg.Done(); h.pollLoop(ctx) }()
	if h.cfg.ListenURL != "" {
		wg.Add(1)
		go func() { defer wg.Done(); h.listenLoop(ctx) }()
	}
	go func() { wg.Wait(); stopped() }()
	return nil
}

// Stop ends the hub's goroutines and waits for them. Safe to call twice,
// and before Start.
func (h *Hub) Stop() { h.BaseStartStop.Stop() }

type notification struct {
	Heads map[uuid.UUID]int64 `json:"heads"`
	// Commands are turns with a newly stored member command.
	Commands []uuid.UUID `json:"commands,omitempty"`
}

// maxPayload keeps a NOTIFY under Postgres's 8000-byte limit.
const maxRoomsPerNotify = 100

func (h *Hub) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
		}
		// Gather the commits of the next few milliseconds into one NOTIFY.
		t := time.NewTimer(h.cfg.Debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		h.mu.Lock()
		pending := h.pending
		h.pending = make(map[uuid.UUID]int64)
		h.mu.Unlock()
		commands := h.commands.takePending()
		for len(commands) > 0 {
			n := min(len(commands), maxRoomsPerNotify)
			payload, _ := json.Marshal(notification{Commands: commands[:n]})
			commands = commands[n:]
			if _, err := h.cfg.DB.ExecContext(ctx, `SELECT pg_notify($1, $2)`, Channel, string(payload)); err != nil && ctx.Err() == nil {
				h.log.Warn("command notify failed", "err", err)
			}
		}
		for len(pending) > 0 {
			batch := notification{Heads: make(map[uuid.UUID]int64)}
			for room, head := range pending {
				batch.Heads[room] = head
				delete(pending, room)
				if len(batch.Heads) == maxRoomsPerNotify {
					break
				}
			}
			payload, _ := json.Marshal(batch)
			if _, err := h.cfg.DB.ExecContext(ctx, `SELECT pg_notify($1, $2)`, Channel, string(payload)); err != nil && ctx.Err() == nil {
				// A lost hint only delays other replicas until their poll.
				h.log.Warn("journal notify failed", "err", err)
			}
		}
	}
}

// heard records head as a room's newest known position; h.mu is held.
func (h *Hub) heard(room uuid.UUID, head int64) {
	if head > h.heads[room] {
		h.heads[room] = head
	}
}

// pollLoop is the slow tick that makes a lost notification only a delay.
// It costs one query per replica however many rooms are followed: the
// heads of the rooms that have waiters, read together; a room whose head
// moved past what the hub heard of is woken. The claim loop and command
// waiters are woken on every tick as before.
func (h *Hub) pollLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.poll(ctx)
		}
	}
}

func (h *Hub) poll(ctx context.Context) {
	h.commands.waiters.wakeAll()
	h.mu.Lock()
	close(h.any)
	h.any = make(chan struct{})
	h.mu.Unlock()
	rooms := h.rooms.keys()
	if len(rooms) == 0 {
		return
	}
	ids := make([]string, len(rooms))
	for i, r := range rooms {
		ids[i] = r.String()
	}
	rows, err := h.cfg.DB.QueryContext(ctx, `SELECT id, next_seq FROM conversations WHERE id = ANY($1::uuid[])`, "{"+strings.Join(ids, ",")+"}")
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("polling the journal heads failed; waking every reader", "err", err)
			h.wakeAll()
		}
		return
	}
	defer rows.Close()
	var moved []uuid.UUID
	h.mu.Lock()
	for rows.Next() {
		var room uuid.UUID
		var head int64
		if err := rows.Scan(&room, &head); err != nil {
			break
		}
		if known, ok := h.heads[room]; !ok || head > known {
			h.heads[room] = head
			moved = append(moved, room)
		}
	}
	h.mu.Unlock()
	if err := rows.Err(); err != nil {
		h.wakeAll()
		return
	}
	for _, room := range moved {
		h.rooms.wake(room)
	}
}

func (h *Hub) listenLoop(ctx context.Context) {
	l := pq.NewListener(h.cfg.ListenURL, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventReconnected:
			// Notifications sent while we were away are gone: re-read.
			h.wakeAll()
		case pq.ListenerEventConnectionAttemptFailed:
			if ctx.Err() == nil {
				h.log.Warn("journal listener reconnect failed", "err", err)
			}
		}
	})
	defer l.Close()
	if err := l.Listen(Channel); err != nil {
		h.log.Error("journal listen failed; relying on the poll tick", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-l.Notify:
			if n == nil { // reconnected; handled by the event callback
				h.wakeAll()
				continue
			}
			var msg notification
			if err := json.Unmarshal([]byte(n.Extra), &msg); err != nil {
				h.wakeAll()
				continue
			}
			h.mu.Lock()
			for room, head := range msg.Heads {
				h.heard(room, head)
			}
			h.mu.Unlock()
			for room := range msg.Heads {
				h.wake(room)
			}
			for _, turn := range msg.Commands {
				h.commands.waiters.wake(turn)
			}
		}
	}
}
