package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/99designs/gqlgen/graphql"
)

// errStreamEnded ends a subscription normally (the client gets "complete").
var errStreamEnded = errors.New("stream ended")

// Stream runs produce in a goroutine that owns the returned channel: it is
// the only sender and closes the channel once, when produce returns. Every
// send selects on ctx.Done, so a client that goes away never leaves the
// goroutine blocked. Closing the channel completes the subscription.
//
// Every subscription goroutine goes through Stream, because it is where a
// stream's failure reaches its client: when produce fails (the database
// went away mid-stream) or panics, the subscription's last response
// carries that error (a panic as INTERNAL, logged with its stack), and the
// server keeps serving everyone else. StreamErrors must be installed on the
// handler for the error to be sent; without it, it is only logged.
func Stream[T any](ctx context.Context, produce func(ctx context.Context, emit func(T) error) error) <-chan T {
	ch := make(chan T, 16)
	go func() {
		defer close(ch) // after the failure is recorded: the reader sees both
		var err error
		defer func() {
			if p := recover(); p != nil {
				slog.ErrorContext(ctx, "subscription panic", "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("subscription panic: %v", p)
			}
			if err == nil || errors.Is(err, errStreamEnded) || ctx.Err() != nil {
				return
			}
			if st, ok := ctx.Value(streamStateKey{}).(*streamState); ok {
				st.fail(err)
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
	}()
	return ch
}

// StreamErrors is the gqlgen extension that delivers a subscription's
// failure: it gives each subscription a place for Stream to record why it
// ended, and when the stream's channel closes with a failure recorded, it
// answers one last response carrying the error (presented like any other:
// a code, retryable) before the transport completes the subscription.
type StreamErrors struct{}

var (
	_ graphql.HandlerExtension     = StreamErrors{}
	_ graphql.OperationInterceptor = StreamErrors{}
	_ graphql.ResponseInterceptor  = StreamErrors{}
)

func (StreamErrors) ExtensionName() string                   { return "StreamErrors" }
func (StreamErrors) Validate(graphql.ExecutableSchema) error { return nil }
func (StreamErrors) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	return next(context.WithValue(ctx, streamStateKey{}, &streamState{}))
}

func (StreamErrors) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp != nil {
		return resp
	}
	st, ok := ctx.Value(streamStateKey{}).(*streamState)
	if !ok {
		return nil
	}
	err := st.take()
	if err == nil {
		return nil
	}
	graphql.AddError(ctx, err)
	return &graphql.Response{Errors: graphql.GetErrors(ctx)}
}

type streamStateKey struct{}

// streamState is one subscription's recorded failure, reported once.
type streamState struct {
	mu       sync.Mutex
	err      error
	reported bool
}

func (s *streamState) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// take returns the failure the first time it is asked, nil after.
func (s *streamState) take() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reported || s.err == nil {
		return nil
	}
	s.reported = true
	return s.err
}

// goRecover runs fn in a goroutine a resolver starts; a panic in it is
// logged and ends only that goroutine, never the server.
func goRecover(ctx context.Context, what string, fn func()) {
	go func() {
		defer func() {
			if p := recover(); p != nil {
				slog.ErrorContext(ctx, "panic in "+what, "panic", p, "stack", string(debug.Stack()))
			}
		}()
		fn()
	}()
}
