package journal

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
)

// TailSize bounds the entries a room's shared tail keeps in memory. A
// follower further behind reads its own pages from the database until it
// is within the tail.
const TailSize = 1024

// tail is one room's shared reader on this replica: one read of the
// database per new position, however many follow the room here. It holds
// the newest entries (at most TailSize, positions start+1 .. last) and
// closes changed whenever last moves or a read fails.
type tail struct {
	refs   int
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	start   int64   // entries after start are in buf
	buf     []Entry // dense, in position order
	last    int64
	err     error // the last read's failure; nil once a read succeeds
	changed chan struct{}
}

// tails are a Log's shared tails, by room.
type tails struct {
	mu    sync.Mutex
	rooms map[uuid.UUID]*tail
}

// acquire joins room's tail, starting it (at the room's head) when none
// runs; release leaves it.
func (l *Log) acquire(ctx context.Context, room uuid.UUID, read func(ctx context.Context, after int64) ([]Entry, error)) (*tail, error) {
	l.tails.mu.Lock()
	defer l.tails.mu.Unlock()
	if l.tails.rooms == nil {
		l.tails.rooms = map[uuid.UUID]*tail{}
	}
	if t := l.tails.rooms[room]; t != nil {
		t.refs++
		return t, nil
	}
	head, err := Head(ctx, l.db, room)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &tail{refs: 1, cancel: cancel, done: make(chan struct{}), start: head, last: head, changed: make(chan struct{})}
	l.tails.rooms[room] = t
	go func() {
		defer close(t.done)
		l.runTail(tctx, room, t, read)
	}()
	return t, nil
}

func (l *Log) release(room uuid.UUID, t *tail) {
	l.tails.mu.Lock()
	t.refs--
	last := t.refs == 0
	if last {
		delete(l.tails.rooms, room)
		t.cancel()
	}
	l.tails.mu.Unlock()
	if last {
		<-t.done
	}
}

// runTail reads the room's new entries whenever the hub says it moved
// (or on its poll tick), and hands them to the followers.
func (l *Log) runTail(ctx context.Context, room uuid.UUID, t *tail, read func(ctx context.Context, after int64) ([]Entry, error)) {
	for {
		wake := l.hub.Wait(room)
		t.mu.Lock()
		after := t.last
		t.mu.Unlock()
		entries, err := read(ctx, after)
		if ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		if err != nil {
			t.err = err
		} else {
			t.err = nil
			t.buf = append(t.buf, entries...)
			if len(entries) > 0 {
				t.last = entries[len(entries)-1].Seq
			}
			if over := len(t.buf) - TailSize; over > 0 {
				t.start = t.buf[over-1].Seq
				t.buf = append([]Entry(nil), t.buf[over:]...)
			}
		}
		moved := err != nil || len(entries) > 0
		if moved {
			close(t.changed)
			t.changed = make(chan struct{})
		}
		t.mu.Unlock()
		if err != nil {
			slog.Default().Warn("reading a room's journal tail failed", "room", room, "err", err)
		}
		if len(entries) > 0 {
			continue
		}
		var retry <-chan time.Time
		var timer *time.Timer
		if err != nil {
			// The hub wakes a room only when it moves: retry a failed
			// read on a timer too.
			timer = time.NewTimer(time.Second)
			retry = timer.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// since is what the tail has after pos: its entries, whether pos is
// within the tail at all, the channel closed at the next change, and the
// last read's failure.
func (t *tail) since(pos int64) (entries []Entry, within bool, changed <-chan struct{}, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos < t.start {
		return nil, false, t.changed, t.err
	}
	i := sort.Search(len(t.buf), func(i int) bool { return t.buf[i].Seq > pos })
	return t.buf[i:len(t.buf):len(t.buf)], true, t.changed, t.err
}

// FollowShared is Follow through the room's shared tail on this replica:
// every follower of the room here is served by one database read per new
// position (read, done once for all); a follower behind the tail reads
// its own pages with read until it has caught up. Entries come in
// position order, none skipped or repeated, until ctx ends or emit
// returns an error (which FollowShared returns). A failed shared read is
// returned to the followers waiting on it.
func (l *Log) FollowShared(ctx context.Context, room uuid.UUID, after int64,
	read func(ctx context.Context, after int64) ([]Entry, error), emit func(Entry) error) error {
	if read == nil {
		read = func(ctx context.Context, after int64) ([]Entry, error) {
			return Read(ctx, l.db, room, after, FollowBatch)
		}
	}
	t, err := l.acquire(ctx, room, read)
	if err != nil {
		return err
	}
	defer l.release(room, t)
	pos := after
	for {
		entries, within, changed, _ := t.since(pos)
		if !within {
			// Behind the tail: a page of its own.
			if entries, err = read(ctx, pos); err != nil {
				return err
			}
		}
		for _, e := range entries {
			if err := emit(e); err != nil {
				return err
			}
			pos = e.Seq
		}
		if len(entries) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			// Woken by a failed shared read: the follower ends with it
			// (its client resumes from pos).
			if _, _, _, err := t.since(pos); err != nil {
				return err
			}
		}
	}
}
