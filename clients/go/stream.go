package client

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"
)

// State is where a room stream stands.
type State string

const (
	// Connecting: dialling, before the server accepted the stream.
	Connecting State = "connecting"
	// Live: subscribed and following.
	Live State = "live"
	// Reconnecting: a retryable failure; retrying with backoff inside the window.
	Reconnecting State = "reconnecting"
	// Offline: the retry window ran out; Retry starts again.
	Offline State = "offline"
	// Closed: stopped, or failed closed (Err says why).
	Closed State = "closed"
)

// Update is one thing a room stream reports: an entry, or a change of state.
type Update struct {
	// Entry is the next entry, in position order; nil for a state change.
	Entry *EntryFields
	State State
	// Err is why the stream is reconnecting, offline or closed.
	Err *Error
}

// RoomStream is a room's journal from a position, for as long as it is
// wanted: it resumes from the last position seen across dropped sockets,
// server restarts and other replicas, never repeating or skipping an
// entry. Retryable failures retry with backoff and jitter within the
// retry window, then the stream is Offline until Retry; any other
// failure closes it. Read Updates until it closes (after Close, or when
// the stream fails closed).
type RoomStream struct {
	c       *Client
	room    string
	updates chan Update
	retry   chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}

	mu    sync.Mutex
	pos   int
	state State
	err   *Error
}

// Follow starts a stream of room's entries after position after (0: all).
func (c *Client) Follow(ctx context.Context, room string, after int) *RoomStream {
	ctx, cancel := context.WithCancel(ctx)
	s := &RoomStream{c: c, room: room, pos: after, state: Connecting, updates: make(chan Update, 64),
		retry: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// Updates delivers entries and state changes; it closes when the stream ends.
func (s *RoomStream) Updates() <-chan Update { return s.updates }

// Position is the last position delivered: where the stream resumes.
func (s *RoomStream) Position() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos
}

// State is where the stream stands, and why when it is not live.
func (s *RoomStream) State() (State, *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.err
}

// Retry starts an Offline stream again now.
func (s *RoomStream) Retry() {
	select {
	case s.retry <- struct{}{}:
	default:
	}
}

// Close ends the stream; Updates closes once it has.
func (s *RoomStream) Close() {
	s.cancel()
	<-s.done
}

// emit reports u unless ctx ended; false when it did.
func (s *RoomStream) emit(ctx context.Context, u Update) bool {
	select {
	case s.updates <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *RoomStream) set(ctx context.Context, st State, err *Error) bool {
	s.mu.Lock()
	same := s.state == st && s.err == err
	s.state, s.err = st, err
	s.mu.Unlock()
	if same {
		return true
	}
	return s.emit(ctx, Update{State: st, Err: err})
}

// wsURL is the graphql-transport-ws address of an HTTP endpoint.
func wsURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	return u.String()
}

func (s *RoomStream) run(ctx context.Context) {
	defer close(s.done)
	defer close(s.updates)
	defer s.cancel()
	p := s.c.cfg.Retry
	var outage time.Time
	attempt := 0
	reauthed := false
	for ctx.Err() == nil {
		err, opened := s.once(ctx)
		if ctx.Err() != nil {
			break
		}
		if opened {
			outage, attempt, reauthed = time.Time{}, 0, false
		}
		if err.Code == Unauthenticated && !reauthed {
			// Ask for the envelope again: a new one gets one more try.
			reauthed = true
			sent, _ := s.c.identity(ctx, false)
			if fresh, ierr := s.c.identity(ctx, true); ierr == nil && fresh != sent {
				continue
			}
		}
		if !err.Retryable() {
			s.set(ctx, Closed, err)
			return
		}
		if outage.IsZero() {
			outage = time.Now()
		}
		left := time.Until(outage.Add(p.Window))
		if left <= 0 {
			if !s.set(ctx, Offline, err) {
				break
			}
			select {
			case <-ctx.Done():
			case <-s.retry:
				outage, attempt = time.Time{}, 0
				s.set(ctx, Connecting, nil)
			}
			continue
		}
		if !s.set(ctx, Reconnecting, err) {
			break
		}
		t := time.NewTimer(min(left, p.backoff(attempt, err.RetryAfter)))
		attempt++
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	s.mu.Lock()
	s.state = Closed
	s.mu.Unlock()
}

// once runs one subscription from the current position until it ends,
// and says why and whether the server had accepted it.
func (s *RoomStream) once(ctx context.Context) (err *Error, opened bool) {
	tok, ierr := s.c.identity(ctx, false)
	if ierr != nil {
		return &Error{Code: Unauthenticated, Message: ierr.Error(), Err: ierr}, false
	}
	hdr := make(map[string][]string)
	hdr[s.c.cfg.Header] = []string{tok}
	t := newWSTransport(wsURL(s.c.cfg.URL), hdr, s.c.cfg.HTTPClient)
	t.pings = &s.c.pings
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, serr := t.Start(dctx)
	cancel()
	if serr != nil {
		return classify(serr), false
	}
	defer t.Close()
	after := s.Position()
	ch, id, serr := RoomJournal(ctx, t, s.room, &after)
	if serr != nil {
		return classify(serr), false
	}
	stop := context.AfterFunc(ctx, func() { t.Unsubscribe(id) })
	defer stop()
	s.set(ctx, Live, nil)
	for msg := range ch {
		if len(msg.Errors) > 0 {
			err = fromGraphQL(msg.Errors)
			continue // read on until the channel closes
		}
		if msg.Data == nil || msg.Data.Journal == nil {
			continue
		}
		e := &msg.Data.Journal.EntryFields
		s.mu.Lock()
		fresh := e.Seq > s.pos
		if fresh {
			s.pos = e.Seq
		}
		s.mu.Unlock()
		if fresh {
			s.emit(ctx, Update{Entry: e, State: Live})
		}
	}
	if err != nil {
		return err, true
	}
	if terr := t.Err(); terr != nil {
		return classify(terr), true
	}
	// The server completed the stream without an error: follow on.
	return &Error{Code: Unavailable, Message: "the server ended the stream"}, true
}
