package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/pg"
)

// Feed answers, on every read path, what a viewer may read of a room now.
type Feed struct {
	db  pg.Querier
	log *journal.Log

	mu sync.Mutex
	// watching counts, by room, the members following it on this replica:
	// the members a shared batch's view is computed for.
	watching map[uuid.UUID]map[uuid.UUID]int
}

// New returns the feed of the rooms in db, whose journal log reads.
func New(db pg.Querier, log *journal.Log) *Feed {
	return &Feed{db: db, log: log, watching: map[uuid.UUID]map[uuid.UUID]int{}}
}

// ErrLeft ends a follow whose viewer is no longer a member of the room: a
// member who has left sees nothing of it from there on.
var ErrLeft = errors.New("the viewer is no longer a member of the room")

// Follow passes emit every entry of room after position after, as viewer
// may read it now, in position order, until ctx ends or emit fails (its
// error is returned), or the viewer leaves the room (ErrLeft). changed
// tells emit whether the entry differs from the one stored: an unchanged
// entry reads the same for every viewer who may read it. It reads through
// the room's shared tail on this replica: one read per new position for
// every follower of the room here.
func (f *Feed) Follow(ctx context.Context, viewer authority.Member, room uuid.UUID, after int64,
	emit func(e journal.Entry, changed bool) error) error {
	start := time.Now()
	defer f.watch(room, viewer.ID)()
	// own are views computed for this viewer alone, by turn, for entries
	// the tail held before this follow started.
	own := map[uuid.UUID]*view{}
	return f.log.FollowShared(ctx, room, after, f.read(room), func(e journal.Entry) error {
		if e.Kind == journal.KindMemberLeft {
			// The audience changed: re-authorise the viewer.
			still, err := authority.IsMember(ctx, f.db, room, viewer.ID)
			if err != nil {
				return err
			}
			if !still {
				return ErrLeft
			}
		}
		v, _ := e.View.(*view)
		if v == nil || !v.covers(viewer.ID, start) {
			var err error
			if v, err = f.ownView(ctx, viewer, room, e, own); err != nil {
				return err
			}
		}
		seen, changed, err := v.project(viewer.ID, e)
		if err != nil {
			return err
		}
		seen.View = nil
		return emit(seen, changed)
	})
}

// ownView is the view of e's turn and citations for viewer alone, now.
// Views of a turn whose entries cite nothing are kept for the follow.
func (f *Feed) ownView(ctx context.Context, viewer authority.Member, room uuid.UUID, e journal.Entry, own map[uuid.UUID]*view) (*view, error) {
	turn, docs, err := subjectsOf(e)
	if err != nil {
		return nil, err
	}
	if turn == uuid.Nil && len(docs) == 0 {
		return everyone, nil
	}
	if len(docs) == 0 {
		if v := own[turn]; v != nil {
			return v, nil
		}
	}
	var turns []uuid.UUID
	if turn != uuid.Nil {
		turns = []uuid.UUID{turn}
	}
	v, err := compute(ctx, f.db, room, turns, docs, []uuid.UUID{viewer.ID})
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		own[turn] = v
	}
	return v, nil
}

// read is how the room's shared tail, and a follower behind it, read the
// room's journal: a page of entries, with one view of their turns and
// documents for every member following the room on this replica, kept
// with the entries.
func (f *Feed) read(room uuid.UUID) func(ctx context.Context, after int64) ([]journal.Entry, error) {
	return func(ctx context.Context, after int64) ([]journal.Entry, error) {
		entries, err := f.log.Read(ctx, room, after, journal.FollowBatch)
		if err != nil || len(entries) == 0 {
			return entries, err
		}
		turns, docs, err := subjects(entries)
		if err != nil {
			return nil, err
		}
		v, err := compute(ctx, f.db, room, turns, docs, f.watchers(room))
		if err != nil {
			return nil, err
		}
		for i := range entries {
			entries[i].View = v
		}
		return entries, nil
	}
}

// watch counts member as following room until the returned func is
// called.
func (f *Feed) watch(room, member uuid.UUID) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watching[room] == nil {
		f.watching[room] = map[uuid.UUID]int{}
	}
	f.watching[room][member]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.watching[room][member]--; f.watching[room][member] <= 0 {
			delete(f.watching[room], member)
		}
		if len(f.watching[room]) == 0 {
			delete(f.watching, room)
		}
	}
}

// watchers are the members following room on this replica.
func (f *Feed) watchers(room uuid.UUID) []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]uuid.UUID, 0, len(f.watching[room]))
	for m := range f.watching[room] {
		out = append(out, m)
	}
	return out
}

// Page reads up to n entries of room after position after, as viewer may
// read them now.
func (f *Feed) Page(ctx context.Context, viewer authority.Member, room uuid.UUID, after int64, n int) ([]journal.Entry, error) {
	entries, err := f.log.Read(ctx, room, after, n)
	if err != nil || len(entries) == 0 {
		return entries, err
	}
	turns, docs, err := subjects(entries)
	if err != nil {
		return nil, err
	}
	v, err := compute(ctx, f.db, room, turns, docs, []uuid.UUID{viewer.ID})
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		if entries[i], _, err = v.project(viewer.ID, e); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// Turn is one viewer's reading of one turn as a whole, as of when Read
// computed it.
type Turn struct {
	v      *view
	viewer uuid.UUID
	id     uuid.UUID
}

// Read computes how viewer reads turn of room now; cited are the
// documents its answer cites, so that Citations can filter them.
func (f *Feed) Read(ctx context.Context, viewer authority.Member, room, turn uuid.UUID, cited []journal.AnswerCitation) (Turn, error) {
	v, err := compute(ctx, f.db, room, []uuid.UUID{turn}, answerDocuments(cited), []uuid.UUID{viewer.ID})
	if err != nil {
		return Turn{}, fmt.Errorf("read turn %s: %w", turn, err)
	}
	return Turn{v: v, viewer: viewer.ID, id: turn}, nil
}

// Withheld reports whether the turn is withheld from the viewer: its
// text, answer, artifacts and approvals' arguments read empty.
func (t Turn) Withheld() bool { return t.v.withheld(t.viewer, t.id) }

// Answer is the turn's stored answer as the viewer reads it: the
// withheld notice when the turn is withheld from them.
func (t Turn) Answer(stored *string) *string {
	if stored == nil || !t.Withheld() || t.v.audienceWithheld[t.id] {
		return stored
	}
	notice := outcome.WithheldAnswer
	return &notice
}

// TerminalReason is the turn's terminal reason as the viewer reads it: a
// completed turn withheld from them ended audience_withheld.
func (t Turn) TerminalReason(state string, stored *string) *string {
	if stored == nil || state != "completed" || !t.Withheld() {
		return stored
	}
	r := outcome.ReasonAudienceWithheld
	return &r
}

// Citations keeps the citations the viewer may read (of those Read was
// given).
func (t Turn) Citations(cs []journal.AnswerCitation) []journal.AnswerCitation {
	return t.v.citations(t.viewer, cs)
}

// withheldTurns counts a room's turns withheld from a member now.
var withheldTurns = `
SELECT count(*) FROM turns t
WHERE t.conversation_id = $1
  AND (t.terminal_reason = '` + outcome.ReasonAudienceWithheld + `' OR NOT ` + authority.TurnReadableSQL("t.conversation_id", "t.id", "$2") + `)`

// WithheldTurns counts the turns of room that member reads withheld now.
func (f *Feed) WithheldTurns(ctx context.Context, room, member uuid.UUID) (int64, error) {
	var n int64
	if err := pg.QueryRow(ctx, f.db, withheldTurns, []any{room, member}, &n); err != nil {
		return 0, fmt.Errorf("withheld turns of %s in %s: %w", member, room, err)
	}
	return n, nil
}
