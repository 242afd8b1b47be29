package extension

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
)

// StreamErrors is the gqlgen extension that delivers a subscription's
// failure: it gives each subscription a place for its stream (graph.Stream)
// to record why it ended (FailStream), and when the stream's channel closes with a failure recorded, it
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
	return next(NewStreamContext(ctx))
}

func (StreamErrors) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp != nil {
		return resp
	}
	err := StreamFailure(ctx)
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

// NewStreamContext is ctx with a place for its subscription's failure.
func NewStreamContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamStateKey{}, &streamState{})
}

// FailStream records err as why the subscription of ctx ended (the first
// failure recorded wins); false, recording nothing, when ctx has no place
// for it (StreamErrors is not installed).
func FailStream(ctx context.Context, err error) bool {
	st, ok := ctx.Value(streamStateKey{}).(*streamState)
	if ok {
		st.fail(err)
	}
	return ok
}

// StreamFailure is the failure recorded for the subscription of ctx the
// first time it is asked, nil after (and when none was).
func StreamFailure(ctx context.Context) error {
	st, ok := ctx.Value(streamStateKey{}).(*streamState)
	if !ok {
		return nil
	}
	return st.take()
}
