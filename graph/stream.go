package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/extension"
)

// errStreamEnded ends a subscription normally (the client gets "complete").
var errStreamEnded = errors.New("stream ended")

// Streams owns the goroutines the subscription resolvers start. Each runs
// under a context that ends when its client goes away or when the owner
// stops; Stop ends them all and waits until every one has returned, so a
// server that closes leaves no subscription goroutine reading a database
// it has closed. A stream the owner ends, or one started after Stop,
// ends with a retryable UNAVAILABLE, never a normal completion: its client
// subscribes again after the last position it saw.
type Streams struct {
	base context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// NewStreams returns a running owner.
func NewStreams() *Streams {
	base, stop := context.WithCancel(context.Background())
	return &Streams{base: base, stop: stop}
}

// Stop ends every owned goroutine and waits for them. It is idempotent.
func (s *Streams) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
}

// start runs fn in an owned goroutine, under a context that also ends at
// Stop; it reports false, running nothing, once the owner has stopped. A
// nil owner runs fn unowned, under ctx alone.
func (s *Streams) start(ctx context.Context, fn func(ctx context.Context)) bool {
	if s == nil {
		go fn(ctx)
		return true
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.base, cancel)
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer unhook()
		fn(ctx)
	}()
	return true
}

// Stream runs produce in a goroutine owner owns (see Streams; nil for
// none) that owns the returned channel: it is the only sender and closes
// the channel once, when produce returns. Every send selects on ctx.Done,
// so a client that goes away never leaves the goroutine blocked. Closing
// the channel completes the subscription.
//
// Every subscription goroutine goes through Stream, because it is where a
// stream's failure reaches its client: when produce fails (the database
// went away mid-stream) or panics, the subscription's last response
// carries that error (a panic as INTERNAL, logged with its stack), and the
// server keeps serving everyone else. StreamErrors must be installed on the
// handler for the error to be sent; without it, it is only logged.
func Stream[T any](ctx context.Context, owner *Streams, produce func(ctx context.Context, emit func(T) error) error) <-chan T {
	ch := make(chan T, 16)
	client := ctx
	// A stream lives no longer than the envelope it was opened under.
	var stopExpiry context.CancelFunc = func() {}
	if until, ok := authority.ExpiresFromContext(ctx); ok {
		ctx, stopExpiry = context.WithDeadlineCause(ctx, until, errEnvelopeExpired)
	}
	started := owner.start(ctx, func(ctx context.Context) {
		defer stopExpiry()
		defer close(ch) // after the failure is recorded: the reader sees both
		var err error
		defer func() {
			if p := recover(); p != nil {
				slog.ErrorContext(ctx, "subscription panic", "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("subscription panic: %v", p)
			}
			if owner.stopping() && client.Err() == nil {
				err = errStopping // the client resubscribes elsewhere, after its last seq
			}
			expired := errors.Is(context.Cause(ctx), errEnvelopeExpired) && client.Err() == nil
			if expired {
				err = authority.ErrEnvelopeExpired() // the client authenticates again and resubscribes
			}
			if err == nil || errors.Is(err, errStreamEnded) || (ctx.Err() != nil && err != errStopping && !expired) {
				return
			}
			if extension.FailStream(ctx, err) {
				return
			}
			slog.ErrorContext(ctx, "subscription stream failed", "err", err)
		}()
		err = produce(ctx, func(v T) error {
			select {
			case ch <- v:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	})
	if !started {
		stopExpiry()
		extension.FailStream(ctx, errStopping)
		close(ch)
	}
	return ch
}

// errEnvelopeExpired is the cause of a stream's end at its envelope's
// expiry.
var errEnvelopeExpired = errors.New("identity envelope expired")

// stopping reports whether the owner has been told to stop.
func (s *Streams) stopping() bool { return s != nil && s.base.Err() != nil }

// errStopping ends a stream the server stops: a retryable UNAVAILABLE, so
// a client subscribes again (to another replica) after the last position
// it saw, rather than taking the stream for complete.
var errStopping = errcode.New(errcode.Unavailable, "the server is stopping; subscribe again after the last position you received")
