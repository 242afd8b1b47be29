package graph

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/extension"
)

// TestStreamsStopEndsAndWaits: Stop ends a stream blocked in produce,
// records a retryable UNAVAILABLE for its client rather than a normal
// completion, and returns only after the goroutine has; a stream started
// after Stop ends at once the same way.
func TestStreamsStopEndsAndWaits(t *testing.T) {
	owner := NewStreams()
	ctx := extension.NewStreamContext(context.Background())
	returned := make(chan struct{})
	ch := Stream(ctx, owner, func(ctx context.Context, emit func(int) error) error {
		defer close(returned)
		if err := emit(1); err != nil {
			return err
		}
		<-ctx.Done() // a follow waiting for the next entry
		return ctx.Err()
	})
	select {
	case v := <-ch:
		if v != 1 {
			t.Fatalf("first value %d, want 1", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no value from the stream")
	}
	owner.Stop()
	select {
	case <-returned:
	default:
		t.Fatal("Stop returned before the stream's goroutine did")
	}
	if _, open := <-ch; open {
		t.Fatal("the stream's channel is still open after Stop")
	}
	if e, ok := errcode.From(extension.StreamFailure(ctx)); !ok || e.Code != errcode.Unavailable {
		t.Fatalf("recorded %v, want UNAVAILABLE", e)
	}

	late := extension.NewStreamContext(context.Background())
	ch = Stream(late, owner,
		func(ctx context.Context, emit func(int) error) error {
			t.Error("produce ran after Stop")
			return nil
		})
	if _, open := <-ch; open {
		t.Fatal("a stream started after Stop is open")
	}
	if err := extension.StreamFailure(late); !errors.Is(err, errStopping) {
		t.Fatalf("late stream recorded %v, want the stopping error", err)
	}
	owner.Stop() // idempotent
}

// TestStreamClientGoneCompletesQuietly: a client that goes away ends its
// stream without an error recorded, owned or not.
func TestStreamClientGoneCompletesQuietly(t *testing.T) {
	for _, owner := range []*Streams{nil, NewStreams()} {
		ctx, cancel := context.WithCancel(extension.NewStreamContext(context.Background()))
		ch := Stream(ctx, owner, func(ctx context.Context, emit func(int) error) error {
			<-ctx.Done()
			return ctx.Err()
		})
		cancel()
		select {
		case _, open := <-ch:
			if open {
				t.Fatal("a value after the client left")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end when its client left")
		}
		if err := extension.StreamFailure(ctx); err != nil {
			t.Fatalf("owner %v: recorded %v, want none", owner != nil, err)
		}
		if owner != nil {
			owner.Stop()
		}
	}
}
